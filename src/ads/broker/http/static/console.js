// ADS console: refreshes the page's <main> from the server every two seconds (the server
// renders and escapes everything), draws the overview's plots with uPlot and asks before
// a delete form is sent. The lag plot draws the LAG_TOP groups with the most lag (or those
// the user ticks under "groups plotted") and folds the others into one summed series, so
// its legend stays small however many groups there are.
(function () {
  "use strict";
  var REFRESH_MS = 2000;
  var LAG_TOP = 5;
  var plots = {};
  var picked = null;  // the groups the user ticked; null: the LAG_TOP with the most lag

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
      ["rates-plot", "lag-plot", "lag-pick"].forEach(function (id) {
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
    el.dataset.series = names.join("\n");
  }

  function latest(values) {
    for (var i = values.length - 1; i >= 0; i--) {
      if (values[i] !== null && values[i] !== undefined) { return values[i]; }
    }
    return 0;
  }

  // The groups by their latest lag, most first; those shown; the rest summed as one series.
  function lagSeries(s) {
    var groups = Object.keys(s.lag).sort(function (a, b) {
      return latest(s.lag[b]) - latest(s.lag[a]) || (a < b ? -1 : 1);
    });
    var shown = picked ? groups.filter(function (g) { return picked.has(g); })
                       : groups.slice(0, LAG_TOP);
    var rest = groups.filter(function (g) { return shown.indexOf(g) < 0; });
    var names = shown.slice();
    var data = [s.time].concat(shown.map(function (g) { return s.lag[g]; }));
    if (rest.length) {
      names.push("other " + rest.length + " group" + (rest.length > 1 ? "s" : "") + " (sum)");
      data.push(s.time.map(function (_, i) {
        var sum = null;
        rest.forEach(function (g) {
          var v = s.lag[g][i];
          if (v !== null && v !== undefined) { sum = (sum || 0) + v; }
        });
        return sum;
      }));
    }
    if (!names.length) {
      names = ["(no groups)"];
      data = [s.time, s.time.map(function () { return null; })];
    }
    pickList(groups, shown);
    return { names: names, data: data };
  }

  // One checkbox per group, most lag first, ticked when plotted; ticking picks by hand.
  function pickList(groups, shown) {
    var box = document.querySelector("#lag-pick .choices");
    if (!box) { return; }
    var wanted = groups.join("\n") + "|" + shown.join("\n");
    if (box.dataset.state === wanted) { return; }
    box.dataset.state = wanted;
    box.textContent = "";
    groups.forEach(function (g) {
      var label = document.createElement("label");
      var input = document.createElement("input");
      input.type = "checkbox";
      input.value = g;
      input.checked = shown.indexOf(g) >= 0;
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + g));
      box.appendChild(label);
    });
    var reset = document.createElement("button");
    reset.type = "button";
    reset.className = "top";
    reset.textContent = "the " + LAG_TOP + " with the most lag";
    box.appendChild(reset);
  }

  document.addEventListener("change", function (event) {
    var box = event.target.closest && event.target.closest("#lag-pick .choices");
    if (!box) { return; }
    picked = new Set(Array.from(box.querySelectorAll("input:checked")).map(function (i) {
      return i.value;
    }));
    refreshPlots();
  });
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#lag-pick button.top")) { return; }
    picked = null;
    refreshPlots();
  });

  function refreshPlots() {
    if (!document.getElementById("rates-plot")) { return Promise.resolve(); }
    return fetch("/api/series", { cache: "no-store" }).then(function (r) {
      return r.json();
    }).then(function (s) {
      draw("rates-plot", "per second", ["records in", "bytes in", "bytes out"],
           [s.time, s.messages_in, s.bytes_in, s.bytes_out], ["records/s", "bytes/s"],
           ["records", "bytes", "bytes"]);
      var lag = lagSeries(s);
      draw("lag-plot", "lag per group", lag.names, lag.data, "records");
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
