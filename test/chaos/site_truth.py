#!/usr/bin/env python3
"""The chaos suite's ground truth, worked out without the fleet's code: Python's own html.parser
(not cheerio) reads every page of a folder of HTML files.

Usage: site_truth.py ROOT
Writes a JSON object to stdout:
  {"pages": {"path/of/page.html": title}, "untitled": [path, ...],
   "brokenLinks": ["path/that/is/linked.html", ...]}
- title: the text of the first <title>, entities decoded, trimmed (the spider's `css: "title"`).
- brokenLinks: same-site links (relative hrefs, fragment and query dropped) to an .html path that
  is not a file under ROOT; a crawl that follows `\\.html$` links fetches each of them once and
  dead-letters it as HTTP 404.
"""
import json
import os
import posixpath
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urldefrag, urljoin, urlsplit


class PageReader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title = None
        self.in_title = False
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "title" and self.title is None:
            self.in_title = True
            self.title = ""
        elif tag == "a":
            for name, value in attrs:
                if name == "href" and value:
                    self.hrefs.append(value.strip())

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False

    def handle_data(self, data):
        if self.in_title:
            self.title += data


def main():
    root = os.path.abspath(sys.argv[1])
    pages, untitled, linked = {}, [], set()
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".html"):
                continue
            path = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                reader = PageReader()
                reader.feed(f.read())
            if reader.title is None or reader.title.strip() == "":
                untitled.append(path)
            else:
                pages[path] = reader.title.strip()
            base = "http://site.invalid/" + path
            for href in reader.hrefs:
                url = urljoin(base, urldefrag(href)[0])
                parts = urlsplit(url)
                if parts.scheme != "http" or parts.netloc != "site.invalid" or parts.query:
                    continue
                target = posixpath.normpath(unquote(parts.path)).lstrip("/")
                if target.endswith(".html"):
                    linked.add(target)
    broken = sorted(t for t in linked if not os.path.isfile(os.path.join(root, t)))
    json.dump({"pages": pages, "untitled": sorted(untitled), "brokenLinks": broken}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
