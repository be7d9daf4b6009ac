"""Griffe extension: render the package's `Example:` and `Call arguments:`.

The docstrings follow the house style (STYLE.md): Google style, with a
`Call arguments:` section for layers and an `Example:` section of doctests
written flush with the heading. Griffe's Google parser knows neither form: it
would show the call arguments as one run-on paragraph and hand the `>>>`
lines to Markdown, which reads them as nested quotes. Before the docstrings
are parsed, this extension rewrites

- `Example:` into an indented `Examples:` section, which griffe renders as
  highlighted Python sessions;
- each `name: description` item of `Call arguments:` into a Markdown list item,
  so the section reads like the `Args:` table above it.

The docstrings themselves are unchanged.
"""

import re

import griffe

_HEADING = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_ITEM = re.compile(r"^    (\**[\w][\w, ]*):\s+(.*)$")


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        docstring = obj.docstring
        if docstring is not None and (
            "Example:" in docstring.value or "Call arguments:" in docstring.value
        ):
            docstring.value = rewrite_sections(docstring.value)


def rewrite_sections(text):
    """Returns `text` with its `Example:` and `Call arguments:` rewritten."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        if not heading or heading.group(1) not in ("Example", "Call arguments"):
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _HEADING.match(lines[end]):
            end += 1
        body = _strip_blank_ends(lines[i + 1 : end])
        if heading.group(1) == "Example":
            out.append("Examples:")
            indented = all(line.startswith("    ") for line in body if line.strip())
            out += [
                line if indented or not line.strip() else "    " + line for line in body
            ]
        else:
            out.append("Call arguments:")
            for line in body:
                item = _ITEM.match(line)
                out.append(
                    f"    - `{item.group(1)}`: {item.group(2)}" if item else line
                )
        out.append("")
        i = end
    return "\n".join(out).rstrip("\n")


def _strip_blank_ends(lines):
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines
