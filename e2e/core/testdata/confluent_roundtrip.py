"""Produce and read back records with confluent_kafka (librdkafka).

Usage: confluent_roundtrip.py BOOTSTRAP TOPIC COUNT COMPRESSION
Prints "OK <count>" on success; exits non-zero with a reason otherwise.
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

bootstrap, topic, count, compression = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

errors = []


def on_delivery(err, msg):
    if err is not None:
        errors.append(str(err))


p = Producer({
    "bootstrap.servers": bootstrap,
    "acks": "all",
    "compression.type": compression,
    "linger.ms": 5,
    "message.timeout.ms": 20000,
})
for i in range(count):
    p.produce(topic, key=f"key-{i % 13}", value=f"value-{i}".encode() * (1 + i % 7),
              headers=[("seq", str(i).encode())], partition=i % 3, on_delivery=on_delivery)
    if i % 500 == 0:
        p.poll(0)
left = p.flush(30)
if left or errors:
    sys.exit(f"produce failed: {left} unflushed, errors: {errors[:3]}")

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "roundtrip-check",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
})
c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
seen = {}
deadline = time.time() + 60
while len(seen) < count and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        sys.exit(f"consume error: {m.error()}")
    seq = int(dict(m.headers())["seq"])
    want = f"value-{seq}".encode() * (1 + seq % 7)
    if m.value() != want or m.key() != f"key-{seq % 13}".encode() or m.partition() != seq % 3:
        sys.exit(f"record {seq} mismatch: partition {m.partition()} key {m.key()}")
    if seq in seen:
        sys.exit(f"record {seq} read twice")
    seen[seq] = m.offset()
c.close()
if len(seen) != count:
    sys.exit(f"read {len(seen)} of {count} records")
# Offsets within each partition follow the produce order.
for part in range(3):
    offs = [seen[s] for s in sorted(seen) if s % 3 == part]
    if offs != sorted(offs):
        sys.exit(f"partition {part}: order broken")
print(f"OK {count}")
