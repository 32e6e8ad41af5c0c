"""TLS contexts from Kafka's `ssl.*` keys, for listeners and for clients of a broker.

Both sides read the same keys, as strings (a broker's listener settings with its
`listener.name.<name>.` overrides already applied, or a client's properties file):

- own key and certificate chain: `ssl.keystore.location` of `ssl.keystore.type=PEM` (one
  file holding the private key and the chain), or inline `ssl.keystore.key` and
  `ssl.keystore.certificate.chain`, or librdkafka's `ssl.key.location` with
  `ssl.certificate.location`; an encrypted key is opened with `ssl.key.password`;
- trusted certificates: `ssl.truststore.location` (PEM), inline `ssl.truststore.certificates`
  or librdkafka's `ssl.ca.location`; without any, the system's certificate authorities;
- `ssl.enabled.protocols` (TLSv1.2, TLSv1.3, ...), `ssl.cipher.suites` (Kafka's IANA names
  or OpenSSL's), `ssl.client.auth` (server: required, requested or none),
  `ssl.endpoint.identification.algorithm` (client: `https` checks the host name, empty
  does not).

Python's ssl reads keys from files only: an inline key is handed to it through an anonymous
in-memory file (memfd), so it is never written to a disk. JKS and PKCS12 stores are not
read: they are refused with a message naming the key. `ssl.cipher.suites` restricts
TLS 1.2 suites only; Python's ssl offers no control over TLS 1.3's.

Every problem raises `TlsConfigError` naming the key, at start-up, never later.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["TlsConfigError", "client_context", "server_context", "uses_tls"]

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# Kafka (Java) names cipher suites as IANA does; OpenSSL has its own names for them.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
}
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                           "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """A TLS setting cannot be used; `key` names it."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def uses_tls(security_protocol: str) -> bool:
    return security_protocol.upper() in ("SSL", "SASL_SSL")


def server_context(props: Mapping[str, str], *, where: str = "") -> ssl.SSLContext:
    """A listener's context. `where` (e.g. "listener SSL") prefixes error messages."""
    try:
        return _server_context(props)
    except TlsConfigError as exc:
        if not where:
            raise
        raise TlsConfigError(f"{where}: {exc}", exc.key) from exc.__cause__


def _server_context(props: Mapping[str, str]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(ctx, props)
    if not _load_own_key(ctx, props):
        raise TlsConfigError(
            "a TLS listener needs its key and certificate: set ssl.keystore.location "
            "(with ssl.keystore.type=PEM) or ssl.keystore.key and "
            "ssl.keystore.certificate.chain", "ssl.keystore.location")
    auth = (props.get("ssl.client.auth") or "none").strip().lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth} is not one of required, requested, "
                             "none", "ssl.client.auth")
    if auth != "none":
        if not _load_trust(ctx, props):
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def client_context(props: Mapping[str, str]) -> ssl.SSLContext | None:
    """A client's context from Kafka client properties; None unless `security.protocol`
    is SSL or SASL_SSL. Java client keys and librdkafka's are both understood."""
    if not uses_tls(props.get("security.protocol") or "PLAINTEXT"):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(ctx, props)
    if not _load_trust(ctx, props):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_own_key(ctx, props)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "none", "https"):
        raise TlsConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: only "
                             "https or empty are known",
                             "ssl.endpoint.identification.algorithm")
    ctx.check_hostname = algorithm == "https"
    return ctx


def _common(ctx: ssl.SSLContext, props: Mapping[str, str]) -> None:
    names = _list(props.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown or not names:
        raise TlsConfigError(f"ssl.enabled.protocols: unknown protocol {', '.join(unknown)}"
                             f" (known: {', '.join(_VERSIONS)})", "ssl.enabled.protocols")
    versions = sorted(_VERSIONS[n] for n in names)
    try:
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    except (ValueError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.enabled.protocols: {exc}", "ssl.enabled.protocols") from exc
    suites = [s for s in _list(props.get("ssl.cipher.suites") or "")
              if s not in _TLS13_SUITES]
    if suites:
        try:
            ctx.set_ciphers(":".join(_IANA_TO_OPENSSL.get(s, s) for s in suites))
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.cipher.suites: no usable suite in {', '.join(suites)}",
                                 "ssl.cipher.suites") from exc


def _load_own_key(ctx: ssl.SSLContext, props: Mapping[str, str]) -> bool:
    password = props.get("ssl.key.password") or None
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    if chain or key:
        if not (chain and key):
            raise TlsConfigError("ssl.keystore.key and ssl.keystore.certificate.chain are set "
                                 "together", "ssl.keystore.key")
        with _memory_file(chain) as chain_path, _memory_file(key) as key_path:
            _load_chain(ctx, chain_path, key_path, password, "ssl.keystore.key")
        return True
    location = props.get("ssl.keystore.location")
    if location:
        _pem_only(props, "ssl.keystore.type")
        _load_chain(ctx, _readable(location, "ssl.keystore.location"), None, password,
                    "ssl.keystore.location")
        return True
    cert = props.get("ssl.certificate.location")
    if cert:
        key_location = props.get("ssl.key.location")
        _load_chain(ctx, _readable(cert, "ssl.certificate.location"),
                    _readable(key_location, "ssl.key.location") if key_location else None,
                    password, "ssl.certificate.location")
        return True
    return False


def _load_trust(ctx: ssl.SSLContext, props: Mapping[str, str]) -> bool:
    loaded = False
    inline = props.get("ssl.truststore.certificates")
    if inline:
        _load_verify(ctx, "ssl.truststore.certificates", cadata=inline)
        loaded = True
    for key in ("ssl.truststore.location", "ssl.ca.location"):
        location = props.get(key)
        if location:
            if key == "ssl.truststore.location":
                _pem_only(props, "ssl.truststore.type")
            _load_verify(ctx, key, cafile=_readable(location, key))
            loaded = True
    return loaded


def _load_chain(ctx: ssl.SSLContext, certfile: str, keyfile: str | None,
                password: str | None, key: str) -> None:
    try:
        ctx.load_cert_chain(certfile, keyfile, password)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"{key}: cannot load the key and certificate chain ({exc.reason}"
                             "; a wrong ssl.key.password, a key that does not match the "
                             "certificate, or not PEM)", key) from exc
    except OSError as exc:
        raise TlsConfigError(f"{key}: {exc}", key) from exc


def _load_verify(ctx: ssl.SSLContext, key: str, cafile: str | None = None,
                 cadata: str | None = None) -> None:
    try:
        ctx.load_verify_locations(cafile=cafile, cadata=cadata)
    except (ssl.SSLError, ValueError) as exc:
        raise TlsConfigError(f"{key}: no PEM certificate could be read ({exc})", key) from exc
    except OSError as exc:
        raise TlsConfigError(f"{key}: {exc}", key) from exc


def _pem_only(props: Mapping[str, str], key: str) -> None:
    kind = (props.get(key) or "JKS").strip().upper()
    if kind != "PEM":
        raise TlsConfigError(f"{key}={kind} is not supported: ADS reads PEM files only; set "
                             f"{key}=PEM", key)


def _readable(location: str, key: str) -> str:
    path = Path(location)
    if not path.is_file() or not os.access(path, os.R_OK):
        raise TlsConfigError(f"{key}: {location} is not a readable file", key)
    return str(path)


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@contextlib.contextmanager
def _memory_file(text: str) -> Iterator[str]:
    """A path whose file holds `text` for the duration: an anonymous memory file where the
    system has them (Linux), so an inline key never reaches a disk; a private temporary
    file elsewhere."""
    data = text.encode()
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ads-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="ads-tls-") as tmp:
        path = Path(tmp) / "pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        yield str(path)
