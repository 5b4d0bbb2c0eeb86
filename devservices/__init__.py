"""The project's local services (PostgreSQL, Redis, Kafka, their local clusters) and the tools
the test suite needs (Prometheus, chromium): ``python3 -m devservices start|stop|status|...``.

Standard library only, and no Django: it runs with the system python3, before the virtualenv
exists and without the project's settings. The fault-injection helpers the failover tests use
(kill and restart one cluster node) are in ``devservices.faults``.
"""
