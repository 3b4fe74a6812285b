#!/usr/bin/env python3
"""Fails where a verb or the stack prints past its request's streams.

The daemon runs many requests at once, each on its own thread with the client's stdin,
stdout and stderr (util/request_io.h: In(), Out(), Err()). A verb that writes to the
process's own stdout or stderr prints into the daemon's log instead of its client's
terminal, and one that asks isatty() of fd 0-2 asks about the daemon. So under src/cli and
src/stack (tests excepted) these are refused: printf, puts, perror, std::cout/cerr,
fprintf/fputs/fwrite/fputc to stdout or stderr, and isatty of the standard descriptors.
Usage: check_request_io.py [SRC_DIR]. Exit status 0 when clean, 1 with one line per use.
"""
import pathlib
import re
import sys

FOLDERS = ("cli", "stack")
PATTERNS = [
    (re.compile(r"(?<![\w:.>])(std::)?printf\s*\("), "printf"),
    (re.compile(r"(?<![\w:.>])(std::)?puts\s*\("), "puts"),
    (re.compile(r"(?<![\w:.>])(std::)?perror\s*\("), "perror"),
    (re.compile(r"std::c(out|err)\b"), "std::cout/cerr"),
    (re.compile(r"\bf(printf|puts|write|putc)\s*\((.*,\s*)?(stdout|stderr)\s*[,)]"),
     "a write to the process's stdout/stderr"),
    (re.compile(r"\bf(printf|puts|flush)\s*\(\s*(stdout|stderr)\b"),
     "a write to the process's stdout/stderr"),
    (re.compile(r"\bisatty\s*\(\s*(0|1|2|STD(IN|OUT|ERR)_FILENO)\s*\)"),
     "isatty of the daemon's own descriptors"),
]
COMMENT = re.compile(r"^\s*//")


def violations(src):
    found = []
    for folder in FOLDERS:
        for path in sorted((src / folder).rglob("*")):
            if path.suffix not in (".h", ".cc") or path.name.endswith("_test.cc"):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for lineno, line in enumerate(text.splitlines(), 1):
                if COMMENT.match(line):
                    continue
                code = re.sub(r'"(\\.|[^"\\])*"', '""', line)
                for pattern, what in PATTERNS:
                    if pattern.search(code):
                        rel = path.relative_to(src.parent)
                        found.append(f"{rel}:{lineno}: {what}: use Out()/Err()/In() "
                                     "(util/request_io.h)")
    return found


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                       pathlib.Path(__file__).resolve().parent.parent / "src")
    if not (src / "cli").is_dir():
        print(f"check_request_io: {src} does not look like volstack's src/", file=sys.stderr)
        return 2
    found = violations(src)
    for v in found:
        print(v)
    if found:
        print(f"check_request_io: {len(found)} use(s) of the process's own streams",
              file=sys.stderr)
        return 1
    print("check_request_io: every print goes through the request's streams")
    return 0


if __name__ == "__main__":
    sys.exit(main())
