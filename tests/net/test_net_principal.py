"""`ssl.principal.mapping.rules` against Kafka's documented examples, and the RFC 2253
subject of certificates made with openssl."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from ads.net.principal import PrincipalMappingError, SslPrincipalMapper, subject_rfc2253

# Kafka's documentation of ssl.principal.mapping.rules, and its tests of the mapper.
DOCUMENTED = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize("name, principal", [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_principal_mapping_documented_examples(name: str, principal: str) -> None:
    assert SslPrincipalMapper(DOCUMENTED).name(name) == principal


def test_principal_mapping_kafka_docs_service_users() -> None:
    """The example of Kafka's security documentation."""
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT")
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,"
                       "C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,"
                       "C=Unknown") == "adminuser@admin"


def test_principal_mapping_escaped_comma_in_a_name() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_principal_mapping_missing_group_is_text() -> None:
    """As Kafka: a back reference to a group the pattern lacks stays literal."""
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?)$/$1@$4/")
    assert mapper.name("CN=a,OU=b") == "a@$4"


@pytest.mark.parametrize("rules, count", [
    ("", 0), ("DEFAULT", 1), ("RULE://", 1), ("  RULE:// ,  DEFAULT  ", 2),
    (",,RULE://,,,DEFAULT,,", 2), ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", 3),
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,"
     "RULE:, DEFAULT, /DEFAULT/,DEFAULT", 5),
])
def test_principal_mapping_rules_split_as_kafka(rules: str, count: int) -> None:
    assert len(SslPrincipalMapper(rules).rules) == count


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1", "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_principal_mapping_invalid_rules_refused(rules: str) -> None:
    with pytest.raises(PrincipalMappingError):
        SslPrincipalMapper(rules)


def test_principal_mapping_no_rule_matches() -> None:
    with pytest.raises(PrincipalMappingError, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^CN=y$/y/").name("CN=x")


def _cert(tmp_path: Path, subject: str) -> bytes:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "k.pem", "-out",
                    "c.pem", "-days", "1", "-subj", subject, "-multivalue-rdn", "-utf8"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=60)
    return ssl.PEM_cert_to_DER_cert((tmp_path / "c.pem").read_text())


@pytest.mark.parametrize("subject, dn", [
    ("/C=US/ST=MD/L=Fulton/O=mycp/OU=SME/CN=Duke", "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"),
    ("/DC=com/DC=example/UID=jdoe/CN=John Doe", "CN=John Doe,UID=jdoe,DC=example,DC=com"),
    # Special characters are escaped, and a leading "#".
    ("/O=Smith, Jones \\+ Co/CN=#tag;<x>", "CN=\\#tag\\;\\<x\\>,O=Smith\\, Jones \\+ Co"),
    ("/OU=a+OU=b/CN=multi", "CN=multi,OU=a+OU=b"),
    ("/CN=Jürgen", "CN=Jürgen"),
    # No keyword: the dotted OID and the hex of the value's DER encoding, as Java.
    ("/emailAddress=a@b.c/CN=mail", "CN=mail,1.2.840.113549.1.9.1=#1605614062 2e63"
     .replace(" ", "")),
])
def test_principal_subject_rfc2253(tmp_path: Path, subject: str, dn: str) -> None:
    assert subject_rfc2253(_cert(tmp_path, subject)) == dn


def test_principal_of_a_certificate_uses_the_rules(tmp_path: Path) -> None:
    der = _cert(tmp_path, "/O=ADS/OU=ServiceUsers/CN=Replicator")
    assert SslPrincipalMapper(DOCUMENTED).principal(der) == "User:replicator"
    assert SslPrincipalMapper().principal(der) == "User:CN=Replicator,OU=ServiceUsers,O=ADS"


def test_principal_subject_of_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="DER"):
        subject_rfc2253(b"\x30\x82\xff")
