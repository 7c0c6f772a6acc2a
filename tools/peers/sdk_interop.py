#!/usr/bin/env python3
"""Batch interop checks against nostr-sdk (rust-nostr), one process for many events.

stdin lines:
  {"check": <event object>}   -> {"id": <id nostr-sdk computes>, "valid": <verify_id and verify_signature>}
  {"generate": N, "seed": S}  -> N lines, each an event signed by nostr-sdk with tricky random content
Written for bitchat-bridge's tests (not copied from anywhere)."""
import json, random, sys
import nostr_sdk as N

TRICKY = ['"', '\\', '\n', '\r', '\t', '\b', '\f', '\x00', '\x01', '\x1f', '\x7f', '/', 'é', '😀', '\u2028', '\u2029',
          'a', 'b', ' ', '<', '>', '&', "'", '\ufeff', '中']

def rand_text(rng, n):
    return ''.join(rng.choice(TRICKY) for _ in range(rng.randint(0, n)))

def main():
    keys = N.Keys.generate()
    for line in sys.stdin:
        req = json.loads(line)
        if "check" in req:
            ev = N.Event.from_json(json.dumps(req["check"], ensure_ascii=False))
            ok = ev.verify_id() and ev.verify_signature()
            print(json.dumps({"id": ev.id().to_hex(), "valid": ok}), flush=True)
        elif "generate" in req:
            rng = random.Random(req.get("seed", 0))
            for i in range(req["generate"]):
                tags = [N.Tag.parse(["g", rand_text(rng, 6) or "g"])]
                if rng.random() < 0.5:
                    tags.append(N.Tag.parse(["n", rand_text(rng, 8)]))
                ev = (N.EventBuilder(N.Kind(20000), rand_text(rng, 40)).tags(tags)
                      .custom_created_at(N.Timestamp.from_secs(1700000000 + i)).finalize(keys))
                print(ev.as_json(), flush=True)

main()
