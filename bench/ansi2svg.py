#!/usr/bin/env python3
"""Turns a terminal capture with SGR escape sequences (`tmux capture-pane
-e -p`) into an SVG picture of the screen, for the docs (docs/chat.md).
Standard library only; understands what cadre and tmux write: reset, bold,
dim, italic, underline, strike, the 8/16 colours, 256 colours and 24-bit
colours, foreground and background.

    bench/ansi2svg.py capture.txt > docs/img/chat.svg
"""

import html
import re
import sys

BASE16 = ["#2e3436", "#cc0000", "#4e9a06", "#c4a000", "#3465a4", "#75507b", "#06989a", "#d3d7cf",
          "#555753", "#ef2929", "#8ae234", "#fce94f", "#729fcf", "#ad7fa8", "#34e2e2", "#eeeeec"]
FG, BG = "#d3d7cf", "#1e1e1e"
CW, LH = 8.4, 17  # cell width and line height, in pixels


def xterm256(n):
    if n < 16:
        return BASE16[n]
    if n >= 232:
        v = 8 + (n - 232) * 10
        return f"#{v:02x}{v:02x}{v:02x}"
    n -= 16
    steps = [0, 95, 135, 175, 215, 255]
    return f"#{steps[n // 36]:02x}{steps[(n // 6) % 6]:02x}{steps[n % 6]:02x}"


def apply(codes, st):
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            st.clear()
        elif c == 1:
            st["bold"] = True
        elif c == 2:
            st["dim"] = True
        elif c == 3:
            st["italic"] = True
        elif c == 4:
            st["underline"] = True
        elif c == 9:
            st["strike"] = True
        elif c in (22,):
            st.pop("bold", None); st.pop("dim", None)
        elif c == 23:
            st.pop("italic", None)
        elif c == 24:
            st.pop("underline", None)
        elif 30 <= c <= 37 or 90 <= c <= 97:
            st["fg"] = BASE16[c - 30 if c < 90 else c - 90 + 8]
        elif c == 39:
            st.pop("fg", None)
        elif 40 <= c <= 47:
            st["bg"] = BASE16[c - 40]
        elif c == 49:
            st.pop("bg", None)
        elif c in (38, 48) and i + 1 < len(codes):
            key = "fg" if c == 38 else "bg"
            if codes[i + 1] == 5 and i + 2 < len(codes):
                st[key] = xterm256(codes[i + 2]); i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                st[key] = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5]); i += 4
        i += 1


def main():
    text = open(sys.argv[1], encoding="utf-8", errors="replace").read().rstrip("\n")
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    cols = max((len(re.sub(r"\x1b\[[0-9;]*m", "", l)) for l in lines), default=80)
    w, h = int(cols * CW) + 24, len(lines) * LH + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
           f'<rect width="100%" height="100%" rx="6" fill="{BG}"/>',
           '<g font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14" xml:space="preserve">']
    st = {}
    for row, line in enumerate(lines):
        y = 12 + row * LH + 13
        col = 0
        for part in re.split(r"(\x1b\[[0-9;]*m)", line):
            m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
            if m:
                apply([int(x) for x in m.group(1).split(";") if x] or [0], st)
                continue
            if not part:
                continue
            x = 12 + col * CW
            if "bg" in st:
                out.append(f'<rect x="{x:.1f}" y="{y - 13}" width="{len(part) * CW:.1f}" height="{LH}" fill="{st["bg"]}"/>')
            attrs = [f'x="{x:.1f}"', f'y="{y}"', f'fill="{st.get("fg", FG)}"']
            if st.get("bold"):
                attrs.append('font-weight="bold"')
            if st.get("italic"):
                attrs.append('font-style="italic"')
            if st.get("dim"):
                attrs.append('opacity="0.6"')
            deco = " ".join(d for d, k in (("underline", "underline"), ("line-through", "strike")) if st.get(k))
            if deco:
                attrs.append(f'text-decoration="{deco}"')
            out.append(f'<text {" ".join(attrs)}>{html.escape(part)}</text>')
            col += len(part)
    out.append("</g></svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
