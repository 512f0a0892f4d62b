#!/usr/bin/env python3
"""A Perfetto trace on standard input, its compressed_packets inflated in
place, on standard output: the packets a reader of the trace sees. Fails on a
packet that is not a Trace.packet, or a compressed one that is not a whole
zlib stream or shares its packet with other fields."""
import sys
import zlib

PACKET_TAG = 0x0A              # Trace.packet, length-delimited
COMPRESSED_TAG = b"\x92\x03"   # TracePacket.compressed_packets (50), length-delimited


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def inflate(data):
    """The packets of `data` (a trace), compressed ones inflated in place."""
    out = bytearray()
    at = 0
    while at < len(data):
        start = at
        if data[at] != PACKET_TAG:
            sys.exit(f"byte {at}: not a Trace.packet")
        length, at = varint(data, at + 1)
        packet = data[at:at + length]
        at += length
        if not packet.startswith(COMPRESSED_TAG):
            out += data[start:at]
            continue
        size, body = varint(packet, len(COMPRESSED_TAG))
        if body + size != len(packet):
            sys.exit(f"byte {start}: compressed_packets is not alone in its packet")
        inflater = zlib.decompressobj()
        out += inflater.decompress(packet[body:])
        if not inflater.eof or inflater.unused_data:
            sys.exit(f"byte {start}: compressed_packets is not one whole zlib stream")
    return bytes(out)


if __name__ == "__main__":
    sys.stdout.buffer.write(inflate(sys.stdin.buffer.read()))
