"""Produce and read back records with confluent_kafka over SASL_SSL.

Usage: confluent_sasl.py BOOTSTRAP TOPIC COUNT CA_FILE MECHANISM USER PASSWORD
Prints "OK <count>" on success; "AUTH_FAILED" when authentication is
refused; exits non-zero with a reason otherwise.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition, OFFSET_BEGINNING

bootstrap, topic, count, ca, mech, user, password = sys.argv[1:8]
count = int(count)
common = {
    "bootstrap.servers": bootstrap,
    "security.protocol": "SASL_SSL",
    "ssl.ca.location": ca,
    "sasl.mechanisms": mech,
    "sasl.username": user,
    "sasl.password": password,
}
auth_failed = []


def on_error(err):
    if err.code() == KafkaError._AUTHENTICATION:
        auth_failed.append(str(err))


errors = []


def on_delivery(err, msg):
    if err is not None:
        errors.append(str(err))


p = Producer(dict(common, **{"acks": "all", "message.timeout.ms": 15000, "error_cb": on_error}))
for i in range(count):
    p.produce(topic, key=f"k{i}", value=f"sasl-{i}".encode(), on_delivery=on_delivery)
left = p.flush(20)
if auth_failed:
    print("AUTH_FAILED", auth_failed[0])
    sys.exit(0)
if left or errors:
    sys.exit(f"produce failed: {left} unflushed, errors: {errors[:3]}")

c = Consumer(dict(common, **{"group.id": "sasl-check", "enable.auto.commit": False}))
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
got = 0
deadline = time.time() + 60
while got < count and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        sys.exit(f"consume error: {m.error()}")
    if m.value() != f"sasl-{got}".encode():
        sys.exit(f"record {got}: {m.value()!r}")
    got += 1
c.close()
if got != count:
    sys.exit(f"read {got} of {count}")
print("OK", count)
