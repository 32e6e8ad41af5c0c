// ADS console: refreshes the page's <main> from the server every two seconds (the server
// renders and escapes everything), draws the overview's plots with uPlot and asks before
// a delete form is sent.
(function () {
  "use strict";
  var REFRESH_MS = 2000;
  var plots = {};

  function stamp() {
    var el = document.getElementById("updated");
    if (el) { el.textContent = "updated " + new Date().toLocaleTimeString(); }
  }

  function fragmentUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }

  function refreshMain() {
    if (document.body.dataset.refresh !== "on") { return Promise.resolve(); }
    return fetch(fragmentUrl(), { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.text();
    }).then(function (text) {
      var main = document.getElementById("main");
      // Keep the plots' elements: they are redrawn in place, not re-created.
      var kept = {};
      ["rates-plot", "lag-plot"].forEach(function (id) {
        var el = document.getElementById(id);
        if (el) { kept[id] = el; }
      });
      main.innerHTML = text;
      Object.keys(kept).forEach(function (id) {
        var fresh = document.getElementById(id);
        if (fresh) { fresh.replaceWith(kept[id]); }
      });
      stamp();
    });
  }

  function width(el) { return Math.max(el.clientWidth || 0, 320); }

  // scales: per series, the scale (and axis) it is drawn against; one axis per scale.
  function draw(id, title, names, data, yLabel, scales) {
    var el = document.getElementById(id);
    if (!el || typeof uPlot === "undefined") { return; }
    var colors = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2"];
    var key = id + ":" + names.join(",");
    if (plots[id] && plots[id].key === key) {
      plots[id].plot.setData(data);
      el.dataset.points = String(data[0].length);
      return;
    }
    if (plots[id]) { plots[id].plot.destroy(); }
    var series = [{}].concat(names.map(function (n, i) {
      return { label: n, stroke: colors[i % colors.length], width: 2, spanGaps: true,
               scale: scales ? scales[i] : "y" };
    }));
    var axes = [{}];
    var labels = scales ? yLabel : [yLabel];
    (scales ? Array.from(new Set(scales)) : ["y"]).forEach(function (scale, i) {
      axes.push({ scale: scale, label: labels[i], size: 70, side: i ? 1 : 3,
                  grid: { show: i === 0 } });
    });
    var opts = { width: width(el), height: 220, title: title, series: series, axes: axes };
    plots[id] = { key: key, plot: new uPlot(opts, data, el) };
    el.dataset.points = String(data[0].length);
  }

  function refreshPlots() {
    if (!document.getElementById("rates-plot")) { return Promise.resolve(); }
    return fetch("/api/series", { cache: "no-store" }).then(function (r) {
      return r.json();
    }).then(function (s) {
      draw("rates-plot", "per second", ["records in", "bytes in", "bytes out"],
           [s.time, s.messages_in, s.bytes_in, s.bytes_out], ["records/s", "bytes/s"],
           ["records", "bytes", "bytes"]);
      var groups = Object.keys(s.lag);
      draw("lag-plot", "lag per group", groups.length ? groups : ["(no groups)"],
           [s.time].concat(groups.length ? groups.map(function (g) { return s.lag[g]; })
                                         : [s.time.map(function () { return null; })]),
           "records");
    });
  }

  function tick() {
    Promise.all([refreshMain(), refreshPlots()]).catch(function (err) {
      var el = document.getElementById("updated");
      if (el) { el.textContent = "update failed: " + err.message; }
    }).then(function () { window.setTimeout(tick, REFRESH_MS); });
  }

  // The delete forms (console.read.only=false) ask first; listened for on the document
  // because the refresh replaces the forms.
  document.addEventListener("submit", function (event) {
    var question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });

  stamp();
  refreshPlots();
  window.setTimeout(tick, REFRESH_MS);
})();
