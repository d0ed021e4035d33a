#!/usr/bin/env python3
"""Reads a rendered aggregate output back with a real parser and checks that hostile
strings landed in it as text, never as markup (tests/tests/aggregate_escaping.rs).

usage: check-rendered.py html|xml|svg FILE STRINGS.json

html: FILE is HTML (the report, or cmark-gfm's rendering of report.md). No element or
      attribute may come from an input: no script, iframe, object, embed, form, base,
      link, meta refresh, no on* attribute, no link but the report's own (#anchors,
      plots/*.svg) and mailto:, no heading but the template's. Every string of STRINGS
      must appear whole in the text, as the format renders it (line breaks as spaces,
      control characters as U+FFFD).
xml:  FILE must be well-formed XML with only JUnit elements; every string must appear
      whole in an attribute or text.
svg:  FILE must be well-formed SVG without script, foreignObject or on* attributes.

Prints what is wrong and exits 1; prints nothing and exits 0 when all is well.
"""

import html.parser
import json
import re
import sys
import xml.etree.ElementTree as ET

FORBIDDEN = {"script", "iframe", "object", "embed", "form", "base", "link", "input",
             "button", "textarea", "frame", "frameset", "applet", "foreignobject"}


def normalise(s):
    out = []
    for c in s:
        if c in "\n\r\t":
            out.append(" ")
        elif ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0:
            out.append("\ufffd")
        else:
            out.append(c)
    return re.sub(r"\s+", " ", "".join(out)).strip()


class Html(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems = []
        self.text = []
        self.headings = 0
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        if tag in FORBIDDEN:
            self.problems.append(f"element <{tag}> from an input")
        if tag == "style":
            self.in_style = True
        if re.fullmatch(r"h[1-6]", tag):
            self.headings += 1
        for k, v in attrs:
            if k.lower().startswith("on"):
                self.problems.append(f"event handler attribute {k}={v!r} on <{tag}>")
            if k in ("href", "src", "xlink:href") and v is not None:
                if not (v.startswith("#") or v.startswith("plots/") or v.startswith("mailto:")):
                    self.problems.append(f"link {k}={v!r} on <{tag}>")
            if k == "http-equiv":
                self.problems.append(f"meta http-equiv={v!r}")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False

    def handle_data(self, data):
        if not self.in_style:
            self.text.append(data)


def check_html(path, strings):
    p = Html()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    p.close()
    text = normalise(" ".join(p.text))
    problems = list(p.problems)
    for s in strings:
        if normalise(s) not in text:
            problems.append(f"not in the text whole: {s!r}")
    print(json.dumps({"headings": p.headings}), file=sys.stderr)
    return problems


JUNIT = {"testsuites", "testsuite", "properties", "property", "testcase", "failure",
         "system-out", "skipped", "error"}


def check_xml(path, strings):
    problems = []
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return [f"not well-formed XML: {e}"]
    found = []
    for el in root.iter():
        if el.tag not in JUNIT:
            problems.append(f"element <{el.tag}> from an input")
        found.extend(el.attrib.values())
        found.append(el.text or "")
    text = normalise(" ".join(found))
    for s in strings:
        if normalise(s) not in text:
            problems.append(f"not in the XML whole: {s!r}")
    return problems


def check_svg(path, _strings):
    problems = []
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return [f"not well-formed SVG: {e}"]
    for el in root.iter():
        tag = el.tag.split("}")[-1].lower()
        if tag in FORBIDDEN:
            problems.append(f"element <{tag}> in a plot")
        for k in el.attrib:
            if k.split("}")[-1].lower().startswith("on"):
                problems.append(f"event handler {k} in a plot")
    return problems


def main():
    mode, path, strings_file = sys.argv[1:4]
    with open(strings_file, encoding="utf-8") as f:
        strings = json.load(f)
    problems = {"html": check_html, "xml": check_xml, "svg": check_svg}[mode](path, strings)
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
