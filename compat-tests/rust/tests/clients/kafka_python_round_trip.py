"""kafka-python (a pure-Python protocol implementation) against a broker:
python kafka_python_round_trip.py BOOTSTRAP TOPIC N

Produces N records with acks=all to partition 0, reads them back with assign +
seek_to_beginning (no consumer group), and prints one JSON line:
{"offsets": [...], "records": [[key, value, offset], ...], "brokers": [[host, port], ...]}
"""
import json
import sys
import time
import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
offsets = [producer.send(topic, key=f"key-{i}".encode(), value=f"value-{i}".encode(),
                         partition=0).get(timeout=30).offset for i in range(n)]
producer.close()

consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
tp = TopicPartition(topic, 0)
consumer.assign([tp])
consumer.seek_to_beginning(tp)
records = []
deadline = time.time() + 30
while len(records) < n and time.time() < deadline:
    for batch in consumer.poll(timeout_ms=1000).values():
        records.extend([m.key.decode(), m.value.decode(), m.offset] for m in batch)
brokers = [[b.host, b.port] for b in consumer._client.cluster.brokers()]
consumer.close()
print(json.dumps({"offsets": offsets, "records": records, "brokers": brokers}))
