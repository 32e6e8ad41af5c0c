"""`ads quotas alter | describe` like kafka-configs.sh --entity-type users / clients; what
it sets is what kafka-python's admin client describes, and its errors."""

from __future__ import annotations

from test_cli_groups import Cap, run

from quota_support import describe


def test_cli_quotas_alter_and_describe(bootstrap: str, capsys: Cap) -> None:
    code, out, _ = run(capsys, "quotas", "alter", "--bootstrap-server", bootstrap,
                       "--entity-type", "users", "--entity-name", "alice",
                       "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert code == 0
    assert out.strip() == "Completed updating config for user-principal 'alice'."
    code, _, _ = run(capsys, "quotas", "alter", "--bootstrap-server", bootstrap,
                     "--entity-type", "users", "--entity-name", "alice",
                     "--entity-type", "clients", "--entity-default",
                     "--add-config", "request_percentage=25")
    assert code == 0
    assert describe(bootstrap, [])[1] == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
        (("client-id", None), ("user", "alice")): {"request_percentage": 25.0}}

    code, out, _ = run(capsys, "quotas", "describe", "--bootstrap-server", bootstrap,
                       "--entity-type", "users")
    assert code == 0
    assert out.splitlines() == ["Quota configs for user-principal 'alice' are "
                                "consumer_byte_rate=2048.0, producer_byte_rate=1024.0"]
    code, out, _ = run(capsys, "quotas", "describe", "--bootstrap-server", bootstrap,
                       "--entity-type", "users", "--entity-name", "alice",
                       "--entity-type", "clients")
    assert out.splitlines() == ["Quota configs for user-principal 'alice', the default "
                                "client-id are request_percentage=25.0"]

    code, _, _ = run(capsys, "quotas", "alter", "--bootstrap-server", bootstrap,
                     "--entity-type", "users", "--entity-name", "alice",
                     "--delete-config", "producer_byte_rate")
    assert code == 0
    assert describe(bootstrap, [("user", 0, "alice")], strict=True)[1] == {
        (("user", "alice"),): {"consumer_byte_rate": 2048.0}}


def test_cli_quotas_errors(bootstrap: str, capsys: Cap) -> None:
    code, _, err = run(capsys, "quotas", "alter", "--bootstrap-server", bootstrap,
                       "--entity-type", "clients", "--entity-name", "app",
                       "--add-config", "producer_byte_rate=1.5")
    assert code == 1
    assert "INVALID_REQUEST: producer_byte_rate cannot be a fractional value." in err
    code, _, err = run(capsys, "quotas", "alter", "--bootstrap-server", bootstrap,
                       "--entity-type", "clients", "--add-config", "producer_byte_rate=1")
    assert code == 2
    assert "--entity-name or --entity-default" in err
