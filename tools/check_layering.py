#!/usr/bin/env python3
"""Fails on an #include that crosses the layering the wrong way.

volstack's libraries stack as util < bdev < {remote, pool, lvm} < export < stack < cli, with
bench beside cli (docs: README.md, "Layout"); remote (devices over the network) is a device
layer like bdev's own. This check parses every #include under src/ and
names each one that draws an arrow that must never exist:

  util   -> anything else      util is the floor every layer stands on
  bdev   -> remote, pool, lvm, export, stack, cli, bench
  remote -> pool, lvm, export, stack, cli, bench
  pool  <-> lvm                the two engines know each other only as BlockDevices
  pool, lvm -> export, stack, cli
  export -> stack, cli
  stack  -> cli, bench         the stack serves the CLI and the bench, never the reverse
  bench  -> cli

  any -> another folder's *_impl.h    a subsystem's internals stay inside its folder (the CLI
                               reaches the engines through their public headers and src/stack)
  any -> another folder's *_format.h  on-disk formats are their engine's own
  cli -> an engine header (util excepted) not in CLI_ENGINE_HEADERS: cli/ is verbs and output
                               over stack and bench; the engine headers it still includes are
                               listed, so a new one is a deliberate, reviewed entry, and moving
                               a verb's work into src/stack shortens the list.

Arrows not listed (cli -> stack, stack -> export, bench -> pool, ...) are allowed here.
Usage: check_layering.py [SRC_DIR]  (default: the src/ next to this script's directory).
Exit status 0 when clean, 1 with one line per violation: file:line: include "x": rule.
"""
import pathlib
import re
import sys

LAYERS = ("util", "bdev", "remote", "pool", "lvm", "export", "stack", "cli", "bench")

# (from, to) -> the rule's text, for every arrow that must never exist.
FORBIDDEN = {}


def forbid(sources, targets, rule):
    for s in sources:
        for t in targets:
            if s != t:
                FORBIDDEN[(s, t)] = rule


forbid(["util"], LAYERS, "util depends on nothing above it")
forbid(["bdev"], ["remote", "pool", "lvm", "export", "stack", "cli", "bench"],
       "bdev depends on nothing above it")
forbid(["remote"], ["pool", "lvm", "export", "stack", "cli", "bench"],
       "remote is a device layer: it depends on bdev and util only")
forbid(["pool"], ["lvm"], "pool and lvm never include each other")
forbid(["lvm"], ["pool"], "pool and lvm never include each other")
forbid(["pool", "lvm"], ["export", "stack", "cli"],
       "the engines (pool, lvm) never include export, stack or cli")
forbid(["export"], ["stack", "cli"], "export never includes stack or cli")

forbid(["stack"], ["cli", "bench"], "the stack never includes cli or bench")
forbid(["bench"], ["cli"], "bench never includes cli")

ENGINES = ("bdev", "remote", "pool", "lvm", "export")
# The engine headers cli/ includes today (see the docstring); shrink it, do not grow it lightly.
CLI_ENGINE_HEADERS = {
    "bdev/block_device.h", "bdev/device_registry.h", "bdev/file_device.h",
    "export/devfs.h", "export/loop_bindings.h", "export/loop_device.h",
    "export/nbd/nbd_server.h",
    "lvm/allocator.h", "lvm/kept_lvs.h", "lvm/lvm.h", "lvm/metadata.h", "lvm/mirrored_lv.h",
    "lvm/pvmove.h", "lvm/pvmove_lock.h", "lvm/thin_lv.h", "lvm/uuid.h", "lvm/vg_ops.h",
    "pool/memory_bounds.h", "pool/send.h", "pool/spa.h", "pool/vdev.h",
    "remote/rbd_device.h", "remote/remote_device.h",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')


def target_layer(src, path, included):
    """The layer an include names: its first component ("pool/spa.h" -> "pool"), or for a
    path relative to the including file ("../pool/spa.h", "spa.h") the folder it resolves
    to under src/. None for system and third-party headers."""
    if "/" in included and not included.startswith("."):
        first = included.split("/")[0]
        return first if first in LAYERS else None
    resolved = (path.parent / included).resolve()
    try:
        return resolved.relative_to(src.resolve()).parts[0]
    except ValueError:
        return None


def violations(src):
    found = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc", ".hpp", ".cpp", ".inc") or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        if layer not in LAYERS:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = target_layer(src, path, m.group(1))
            rule = FORBIDDEN.get((layer, target))
            base = m.group(1).rsplit("/", 1)[-1]
            if not rule and target and target != layer and base.endswith("_impl.h"):
                rule = "a *_impl.h is included only inside its own folder"
            if not rule and target and target != layer and base.endswith("_format.h"):
                rule = "a *_format.h (an on-disk format) is included only inside its own folder"
            if (not rule and layer == "cli" and target in ENGINES and
                    m.group(1) not in CLI_ENGINE_HEADERS):
                rule = ("cli reaches the engines through stack; a new engine header in cli is "
                        "an entry in tools/check_layering.py's CLI_ENGINE_HEADERS")
            if rule:
                rel = path.relative_to(src.parent)
                found.append(f'{rel}:{lineno}: include "{m.group(1)}": {layer} -> {target} '
                             f'is forbidden ({rule})')
    return found


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                       pathlib.Path(__file__).resolve().parent.parent / "src")
    if not (src / "util").is_dir():
        print(f"check_layering: {src} does not look like volstack's src/", file=sys.stderr)
        return 2
    found = violations(src)
    for v in found:
        print(v)
    if found:
        print(f"check_layering: {len(found)} forbidden include(s)", file=sys.stderr)
        return 1
    print("check_layering: no forbidden includes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
