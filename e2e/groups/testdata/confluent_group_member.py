"""One member of a consumer group that consumes until killed, with manual,
synchronous commits (one per record), printing what it owns and reads.

usage: confluent_group_member.py BROKER TOPIC GROUP STRATEGY
(STRATEGY is partition.assignment.strategy: range, roundrobin,
cooperative-sticky). One line per event, flushed at once so that a kill -9
loses nothing printed:
  ASSIGN p,p,...  partitions added (eager protocols: the whole assignment; - none)
  REVOKE p,p,...  partitions taken away (LOST p,... when lost)
  GOT p o         a record received, printed before its commit
  OK p o          its commit (of offset o+1) succeeded
  FAIL p o ERR    its commit failed
each followed by the seconds since the start, for failure messages.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaException

broker, topic, group, strategy = sys.argv[1:5]
start = time.time()


def say(*fields):
    print(*fields, "%.3f" % (time.time() - start), flush=True)


def names(ps):
    return ",".join(str(p.partition) for p in ps)


def event(what):
    def cb(_consumer, ps):
        say(what, names(ps) or "-")
    return cb


c = Consumer({
    "bootstrap.servers": broker,
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "partition.assignment.strategy": strategy,
    # 6 s is the broker's default group.min.session.timeout.ms; a short
    # heartbeat interval lets the survivor join the rebalance quickly.
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
})
c.subscribe([topic], on_assign=event("ASSIGN"), on_revoke=event("REVOKE"), on_lost=event("LOST"))
deadline = time.time() + 120  # the test kills us long before
while time.time() < deadline:
    m = c.poll(0.2)
    if m is None:
        continue
    if m.error():
        say("ERROR", m.error())
        continue
    say("GOT", m.partition(), m.offset())
    try:
        c.commit(message=m, asynchronous=False)
        say("OK", m.partition(), m.offset())
    except KafkaException as e:
        say("FAIL", m.partition(), m.offset(), e.args[0].name())
c.close()
