"""Short-lived certificates for TLS tests, made with the `openssl` command in a temporary
directory (never kept): a CA, a broker certificate for 127.0.0.1/localhost, client
certificates signed by the CA, one by an unrelated CA, and an expired one."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENT_SUBJECT = "/C=US/O=ADS Tests/OU=Engineering/CN=alice"
# Java's RFC 2253 form of CLIENT_SUBJECT: the last RDN first.
CLIENT_DN = "CN=alice,OU=Engineering,O=ADS Tests,C=US"
KEY_PASSWORD = "key-secret"


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path  # the CA's certificate (PEM)
    broker_cert: Path
    broker_key: Path
    broker_keystore: Path  # key and chain in one PEM file (ssl.keystore.type=PEM)
    broker_encrypted_keystore: Path  # the same, its key encrypted with KEY_PASSWORD
    client_cert: Path
    client_key: Path
    client_keystore: Path
    rogue_cert: Path  # signed by a CA the broker does not trust
    rogue_key: Path
    expired_cert: Path  # signed by the CA, expired
    expired_key: Path

    def broker_settings(self, prefix: str = "") -> dict[str, str]:
        """The broker's ssl.* keys (optionally listener-prefixed) with PEM files."""
        return {f"{prefix}ssl.keystore.type": "PEM",
                f"{prefix}ssl.keystore.location": str(self.broker_keystore),
                f"{prefix}ssl.truststore.type": "PEM",
                f"{prefix}ssl.truststore.location": str(self.ca)}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key(cwd: Path, name: str) -> Path:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-out", f"{name}.key", cwd=cwd)
    return cwd / f"{name}.key"


def _ca(cwd: Path, name: str) -> tuple[Path, Path]:
    key = _key(cwd, name)
    _openssl("req", "-x509", "-new", "-key", key.name, "-out", f"{name}.pem", "-days", "2",
             "-subj", f"/CN=ADS test {name}", cwd=cwd)
    return cwd / f"{name}.pem", key


def _signed(cwd: Path, name: str, subject: str, ca: tuple[Path, Path], days: str,
            san: str | None = None) -> tuple[Path, Path]:
    key = _key(cwd, name)
    _openssl("req", "-new", "-key", key.name, "-out", f"{name}.csr", "-subj", subject, cwd=cwd)
    extra: list[str] = []
    if san is not None:
        (cwd / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        extra = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", ca[0].name, "-CAkey", ca[1].name,
             "-CAcreateserial", "-out", f"{name}.pem", "-days", days, *extra, cwd=cwd)
    return cwd / f"{name}.pem", key


def _keystore(cwd: Path, name: str, cert: Path, key: Path) -> Path:
    path = cwd / f"{name}-keystore.pem"
    path.write_text(key.read_text() + cert.read_text())
    return path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    rogue_ca = _ca(directory, "rogue-ca")
    broker = _signed(directory, "broker", "/CN=localhost", ca, "2",
                     san="DNS:localhost,IP:127.0.0.1")
    client = _signed(directory, "client", CLIENT_SUBJECT, ca, "2")
    rogue = _signed(directory, "rogue", "/CN=mallory", rogue_ca, "2")
    expired = _signed(directory, "expired", "/CN=old", ca, "-1")
    _openssl("pkcs8", "-topk8", "-in", broker[1].name, "-out", "broker-encrypted.key",
             "-v2", "aes-256-cbc", "-passout", f"pass:{KEY_PASSWORD}", cwd=directory)
    return Pki(directory, ca[0], broker[0], broker[1],
               _keystore(directory, "broker", *broker),
               _keystore(directory, "broker-encrypted", broker[0],
                         directory / "broker-encrypted.key"), client[0], client[1],
               _keystore(directory, "client", *client), rogue[0], rogue[1],
               expired[0], expired[1])
