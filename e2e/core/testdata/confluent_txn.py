"""Transactions with confluent_kafka (librdkafka): commit one, abort one.

Usage: confluent_txn.py BOOTSTRAP TOPIC COUNT
Produces COUNT records "commit-<i>" in a committed transaction and COUNT
"abort-<i>" in an aborted one, then reads the topic back with a
read_committed and a read_uncommitted consumer. Prints
"OK committed COUNT aborted COUNT" on success; exits non-zero with a
reason otherwise.
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
partitions = 3
errors = []


def on_delivery(err, msg):
    if err is not None:
        errors.append(str(err))


p = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": "py-txn-producer",
    "transaction.timeout.ms": 30000,
    "linger.ms": 5,
    "message.timeout.ms": 30000,
})
p.init_transactions(60)
for prefix, commit in (("commit", True), ("abort", False)):
    p.begin_transaction()
    for i in range(count):
        p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % partitions, on_delivery=on_delivery)
        if i % 100 == 0:
            p.poll(0)
    if commit:
        p.commit_transaction(60)
    else:
        # Flush first so the records are in the log before the abort.
        left = p.flush(30)
        if left:
            sys.exit(f"{left} records unflushed before the abort")
        p.abort_transaction(60)
if errors:
    sys.exit(f"produce errors: {errors[:3]}")


def read(isolation, want):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"py-txn-check-{isolation}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in range(partitions)])
    vals = []
    deadline = time.time() + 60
    while len(vals) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            sys.exit(f"consume error ({isolation}): {m.error()}")
        vals.append(m.value().decode())
    # Anything after the wanted count would be an aborted record leaking;
    # the committed ones of the second transaction are none, so a short
    # extra poll is enough to see it.
    end = time.time() + 2
    while time.time() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            vals.append(m.value().decode())
    c.close()
    return vals


committed = read("read_committed", count)
if len(committed) != count or any(not v.startswith("commit-") for v in committed):
    sys.exit(f"read_committed saw {len(committed)} values, want the {count} committed: {committed[:5]}")
everything = read("read_uncommitted", 2 * count)
aborted = [v for v in everything if v.startswith("abort-")]
if len(everything) != 2 * count or len(aborted) != count:
    sys.exit(f"read_uncommitted saw {len(everything)} values ({len(aborted)} aborted), want {2 * count}")
print(f"OK committed {len(committed)} aborted {len(aborted)}")
