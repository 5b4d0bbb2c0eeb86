"""Creating a topic the consumer reads but nobody may have written yet (player-profiles).

The match-results topic comes into being with the first result a producer sends (the broker
auto-creates it). The profiles topic may stay unwritten for a long time (game servers that send
names on their results only), and a consumer that subscribes to a topic that does not exist
notices it only at its next metadata refresh, minutes later. So the consumer creates it, with
the partitions and replication of settings (KAFKA_TOPIC_PARTITIONS, ..._REPLICATION_FACTOR).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError


def topic_create_if_missing(*, bootstrap_servers: Sequence[str], name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=list(bootstrap_servers), client_id="ingest-admin")
    try:
        admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=settings.KAFKA_TOPIC_PARTITIONS,
                    replication_factor=settings.KAFKA_TOPIC_REPLICATION_FACTOR,
                    topic_configs={
                        "min.insync.replicas": str(settings.KAFKA_TOPIC_MIN_INSYNC_REPLICAS)
                    },
                )
            ]
        )
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
