#!/usr/bin/env python3
"""Where the bytes of a Perfetto export go, packet kind by packet kind:
    tests/bench/perfetto_sizes.py OUT.pftrace EVENTS
EVENTS is the trace's event count (`tracectl verify`). Walks the wire
format itself (no protobuf package needed): per kind of packet its count,
bytes, bytes per event, and per field; for slice begins and instants the
bytes of each debug annotation by its interned name. A deflated export's
packets are counted as they inflate."""
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from perfetto_inflate import inflate, varint  # noqa: E402


def fields(data, at, end):
    """(field, start, end, value): value is an int or a (begin, end) span."""
    while at < end:
        start = at
        key, at = varint(data, at)
        wire = key & 7
        if wire == 0:
            value, at = varint(data, at)
        elif wire == 1:
            value, at = None, at + 8
        elif wire == 5:
            value, at = None, at + 4
        elif wire == 2:
            length, body = varint(data, at)
            value, at = (body, body + length), body + length
        else:
            raise ValueError(f"wire type {wire} at byte {start}")
        yield key >> 3, start, at, value


TRACK_EVENT, INTERNED, TYPE, NAME_IID, ANNOTATION = 11, 12, 9, 10, 4
NOT_PAYLOAD = {8, 10, 12, 13, 58, 59}  # timestamp, sequence, interned, flags, clock, defaults
KINDS = {1: "slice begin", 2: "slice end", 3: "instant", 4: "counter"}


def main():
    stored = open(sys.argv[1], "rb").read()
    events = int(sys.argv[2])
    data = inflate(stored)
    if len(data) != len(stored):
        print(f"{len(stored)} bytes deflated: {len(stored) / events:.2f} B/event; inflated:")
    names, annotation_names = {}, {}
    count, size = collections.Counter(), collections.Counter()
    by_field, by_annotation = collections.Counter(), collections.Counter()
    for _, start, end, (body, body_end) in fields(data, 0, len(data)):
        kind = "other"
        parts = list(fields(data, body, body_end))
        for field, _, _, value in parts:
            if field == INTERNED:
                for table, _, _, entry in fields(data, *value):
                    if table in (2, 3):  # event_names, debug_annotation_names
                        iid = text = None
                        for f, _, _, v in fields(data, *entry):
                            iid = v if f == 1 else iid
                            text = data[v[0]:v[1]].decode() if f == 2 else text
                        (names if table == 2 else annotation_names)[iid] = text
        payload = [f for f, _, _, _ in parts if f not in NOT_PAYLOAD]
        if payload:
            kind = f"packet field {payload[0]}"
        for field, _, _, value in parts:
            if field != TRACK_EVENT:
                continue
            event = list(fields(data, *value))
            event_type = next((v for f, _, _, v in event if f == TYPE), None)
            name = next((names.get(v, v) for f, _, _, v in event if f == NAME_IID), None)
            kind = KINDS.get(event_type, f"track event type {event_type}")
            for f, s, e, v in event:
                if f == ANNOTATION:
                    label = next((annotation_names.get(x, x)
                                  for g, _, _, x in fields(data, *v) if g == 1), "?")
                    by_annotation[(kind, label)] += e - s
        count[kind] += 1
        size[kind] += end - start
        for field, s, e, _ in parts:
            by_field[(kind, field)] += e - s
        by_field[(kind, "framing")] += (end - start) - sum(e - s for _, s, e, _ in parts)
    print(f"{len(data)} bytes, {events} events: {len(data) / events:.2f} B/event")
    for kind, total in size.most_common():
        n = count[kind]
        print(f"{kind}: {n} packets, {total / n:.1f} B each, {total / events:.2f} B/event")
        for (k, field), b in sorted(by_field.items(), key=lambda item: -item[1]):
            if k == kind:
                print(f"    field {field}: {b / n:.2f} B/packet")
        for (k, label), b in sorted(by_annotation.items(), key=lambda item: -item[1]):
            if k == kind:
                print(f"    annotation {label}: {b / n:.2f} B/packet")


if __name__ == "__main__":
    main()
