"""Apache Kafka's Java Admin client and `kafka-acls` against a secured ADS cluster: three
`ads broker` processes on a real ZooKeeper with the ACL authorizer, each with a PLAINTEXT
listener (the brokers' own, User:ANONYMOUS a super user as in most development setups) and
a SASL_PLAINTEXT listener offering PLAIN (the operator `admin`, a super user) and SCRAM.

The Java program (`admin-security` in tests/java) creates a SCRAM user, grants it ACLs,
checks that the user is refused before and served after, deletes an ACL and the user, and
checks the refusals again. `kafka-acls` adds, lists and removes ACLs as an operator would,
logged in through `--command-config`; what it lists is compared with Apache Kafka's own
broker (tests/kafka_reference.py, with Kafka's StandardAuthorizer) given the same
commands."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ads.testing.zookeeper import zookeeper_available
from broker_process import free_port
from cluster_support import Cluster
from java_support import CLIENT_VERSIONS, run_scenario
from kafka_reference import KafkaReference
from kafka_tool_support import ok, run
from sasl_support import PLAIN_MODULE

pytestmark = [pytest.mark.broker_process, pytest.mark.kafka_reference,
              pytest.mark.timeout(240)]

ADMIN_PASSWORD = "admin-secret"  # noqa: S105 - a test credential
AUTHORIZER = ("authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
              "super.users=User:admin;User:ANONYMOUS")


class SecuredCluster:
    def __init__(self, cluster: Cluster, sasl_ports: dict[int, int]) -> None:
        self.cluster = cluster
        self.sasl_bootstrap = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    if not zookeeper_available():
        pytest.skip("the zookeeper package is not installed (make system-deps)")
    c = Cluster(tmp_path_factory.mktemp("secured"), 3, *AUTHORIZER,
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                f'{PLAIN_MODULE} required user_admin="{ADMIN_PASSWORD}";',
                "default.replication.factor=3")
    sasl_ports = {node: free_port() for node in c.brokers}
    for node, broker in c.brokers.items():
        broker.sets = (*broker.sets, f"listeners=PLAINTEXT://127.0.0.1:{broker.port},"
                                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[node]}")
    with c.running():
        yield SecuredCluster(c, sasl_ports)


@pytest.mark.parametrize("version", CLIENT_VERSIONS)
def test_java_admin_manages_scram_users_and_acls(secured: SecuredCluster,
                                                 version: str) -> None:
    run_scenario(secured.cluster, version, "admin-security", secured.sasl_bootstrap,
                 "admin.user=admin", f"admin.password={ADMIN_PASSWORD}")


def _admin_properties(path: Path, password: str = ADMIN_PASSWORD) -> Path:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN_MODULE} required username="admin" '
                    f'password="{password}";\n')
    return path


def _acl_commands(bs: str, name: str, *login: str) -> list[tuple[str, ...]]:
    """What an operator runs: grants on a topic, a prefix and a group, a listing of each,
    one removal, and the listing again; every resource and principal named after `name`,
    so that each test starts from no ACLs on the module's cluster."""
    base = ("kafka-acls", "--bootstrap-server", bs, *login)
    bob, mallory, carol = (f"User:{who}-{name}" for who in ("bob", "mallory", "carol"))
    return [
        (*base, "--add", "--allow-principal", bob, "--operation", "Read",
         "--operation", "Describe", "--topic", f"{name}-t", "--group", f"{name}-g"),
        (*base, "--add", "--deny-principal", mallory, "--operation", "All",
         "--topic", f"{name}-", "--resource-pattern-type", "prefixed"),
        (*base, "--add", "--allow-principal", carol, "--producer", "--topic", f"{name}-p",
         "--transactional-id", f"{name}-tx", "--idempotent"),
        (*base, "--list", "--topic", f"{name}-t"),
        (*base, "--list", "--topic", f"{name}-", "--resource-pattern-type", "prefixed"),
        (*base, "--list", "--group", f"{name}-g"),
        (*base, "--list", "--principal", carol),
        (*base, "--remove", "--force", "--allow-principal", bob, "--operation",
         "Describe", "--topic", f"{name}-t"),
        (*base, "--list", "--topic", f"{name}-t"),
    ]


def _sorted_blocks(text: str) -> str:
    """kafka-acls prints resources, and each resource's ACLs, in the order the broker
    answers them (Kafka's is a hash order): sorted, the two outputs compare."""
    out = []
    for block in re.split(r"\n(?=Current ACLs|Adding ACLs|Removing ACLs)", text.strip()):
        head, *rest = block.split("\n")
        out.append("\n".join([head, *sorted(line for line in rest if line.strip())]))
    return "\n".join(sorted(out))


def test_kafka_acls_adds_lists_and_removes(secured: SecuredCluster, tmp_path: Path) -> None:
    login = ("--command-config", str(_admin_properties(tmp_path / "admin.properties")))
    outputs = [ok(*c) for c in _acl_commands(secured.sasl_bootstrap, "acl", *login)]
    listed = outputs[3]
    assert "ResourcePattern(resourceType=TOPIC, name=acl-t, patternType=LITERAL)" in listed
    for operation in ("READ", "DESCRIBE"):
        assert (f"(principal=User:bob-acl, host=*, operation={operation}, "
                "permissionType=ALLOW)") in listed, listed
    assert "operation=ALL, permissionType=DENY" in outputs[4], outputs[4]
    assert "(principal=User:bob-acl, host=*, operation=READ, permissionType=ALLOW)" \
        in outputs[5]
    for carol in ("WRITE", "CREATE", "DESCRIBE", "IDEMPOTENT_WRITE"):
        assert f"principal=User:carol-acl, host=*, operation={carol}," in outputs[6], \
            outputs[6]
    after = outputs[-1]
    assert "operation=READ" in after and "operation=DESCRIBE" not in after, after
    # A wrong password: refused at login.
    wrong = _admin_properties(tmp_path / "wrong.properties", "not-the-password")
    done = run("kafka-acls", "--bootstrap-server", secured.sasl_bootstrap,
               "--command-config", str(wrong), "--list")
    assert done.returncode != 0
    assert "SaslAuthenticationException" in done.stdout + done.stderr, done.stderr[-2000:]


def test_kafka_acls_prints_the_same_for_kafka_and_ads(secured: SecuredCluster,
                                                      tmp_path: Path) -> None:
    """The same kafka-acls commands against Apache Kafka 4.4 (StandardAuthorizer,
    User:ANONYMOUS a super user) and the ADS cluster's PLAINTEXT listener print the same."""
    overrides = {"authorizer.class.name":
                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:ANONYMOUS"}
    with KafkaReference(tmp_path / "kafka", overrides) as kafka:
        kafka_out = [_sorted_blocks(ok(*c)) for c in _acl_commands(kafka.bootstrap, "same")]
    ads_out = [_sorted_blocks(ok(*c))
               for c in _acl_commands(secured.cluster.bootstrap, "same")]
    assert ads_out == kafka_out
