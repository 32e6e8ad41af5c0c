"""Security mechanisms without I/O: JAAS configuration, SASL PLAIN and SCRAM servers."""
