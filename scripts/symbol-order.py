#!/usr/bin/env python3
"""Part of scripts/symbol-order: prints the functions the callgrind profiles
WORK/cg.1 .. WORK/cg.N of BINARY executed, profile by profile, most executed
first, named by the linker map MAP (each function is an input section
`.text.NAME` there, with its address and size).

    symbol-order.py MAP BINARY WORK N
"""

import bisect
import re
import sys


# The compiler puts functions it guesses are cold (or hot, or run only at
# start or exit) in sections named `.text.unlikely.NAME` and so on; the
# linker's ordering file wants the symbol, NAME.
PREFIXES = ("unlikely.", "hot.", "startup.", "exit.", "split.")


def symbol(section):
    for p in PREFIXES:
        if section.startswith(p):
            return section[len(p):]
    return section


def sections(map_file):
    secs = []
    pattern = re.compile(r"\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+\S.*:\(\.text\.(\S+)\)$")
    for line in open(map_file, errors="replace"):
        m = pattern.match(line)
        if m:
            secs.append((int(m.group(1), 16), int(m.group(2), 16), symbol(m.group(3))))
    secs.sort()
    return secs


def costs(profile, binary, secs, starts):
    """Instructions executed per function of BINARY's own object, from the
    callgrind format: `ob=` name compression, absolute or relative (`+N`,
    `-N`) addresses, and after `calls=` one line of inclusive cost that is
    not the caller's own."""
    names, ob, addr, after_call, cost = {}, None, 0, False, {}
    for line in open(profile, errors="replace"):
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3).strip()
            if m.group(1) == "ob":
                ob = names.get(m.group(2))
            continue
        if line.startswith("calls="):
            after_call = True
            continue
        if line[:1] not in "0123456789+-*":
            continue
        tok = line.split()[0]
        if tok.startswith("0x"):
            addr = int(tok, 16)
        elif tok[0] == "+":
            addr += int(tok[1:])
        elif tok[0] == "-":
            addr -= int(tok[1:])
        if after_call:
            after_call = False
            continue
        if ob != binary:
            continue
        j = bisect.bisect_right(starts, addr) - 1
        if j >= 0 and addr < secs[j][0] + secs[j][1]:
            parts = line.split()
            count = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
            cost[secs[j][2]] = cost.get(secs[j][2], 0) + count
    return cost


def main():
    map_file, binary, work, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    secs = sections(map_file)
    starts = [s[0] for s in secs]
    order, seen = [], set()
    for i in range(1, n + 1):
        cost = costs(f"{work}/cg.{i}", binary, secs, starts)
        for name, _ in sorted(cost.items(), key=lambda kv: -kv[1]):
            if name not in seen:
                seen.add(name)
                order.append(name)
    print("# Functions a run executes, for build.rs: written by scripts/symbol-order.")
    print("\n".join(order))


if __name__ == "__main__":
    main()
