"""Consume up to N records of a topic in a consumer group with manual,
synchronous commits (one per record), print the offsets, exit.

usage: confluent_group.py BROKER TOPIC GROUP N
prints "FIRST <offset>" for the first record and "DONE <count> <next>" at the end
"""
import sys
import time

from confluent_kafka import Consumer

broker, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({
    "bootstrap.servers": broker,
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
})
c.subscribe([topic])
got, nxt, first = 0, -1, None
deadline = time.time() + 60
while got < n and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        print("ERROR", m.error(), flush=True)
        sys.exit(1)
    if first is None:
        first = m.offset()
        print("FIRST", first, flush=True)
    c.commit(message=m, asynchronous=False)
    got += 1
    nxt = m.offset() + 1
c.close()
print("DONE", got, nxt, flush=True)
