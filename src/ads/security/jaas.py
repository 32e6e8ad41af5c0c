"""Kafka's JAAS configuration text; the parser lives in ``ads.common.jaas`` so clients
(``ads.client``) read the same `sasl.jaas.config` lines the broker does."""

from ads.common.jaas import FLAGS, JaasError, LoginModule, parse_jaas_config, parse_jaas_file

__all__ = ["FLAGS", "JaasError", "LoginModule", "parse_jaas_config", "parse_jaas_file"]
