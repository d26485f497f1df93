#!/usr/bin/env bash
# Fails when a product source file is over 700 lines, or a function in
# fence/, storage/ or proxy/ is over 80 lines, and prints every offender
# (issue 26's limits: a newcomer reads a file, and a function, whole).
#
# Product files: every *.h and *.cc under a top-level folder whose
# CMakeLists.txt calls fencepost_layer (the libraries, so a new one such as
# cli/ is covered by its own CMakeLists.txt); tests/, examples/ and tools
# are not product.
#
# Functions are found by a heuristic, not a parser:
#   - comments, string and character literals (raw strings included) and
#     preprocessor lines are blanked first, so their braces do not count;
#   - braces are matched; a `{` opened where only namespaces (and extern "C")
#     are open starts a function when the statement before it has a `(`, no
#     `=` outside parentheses (an initializer) and is not a class, struct,
#     enum or union; a constructor's brace initializers (`a_{x}, b_{y} {`)
#     stay part of the same function;
#   - a function's length runs from the first line of its statement (the
#     signature, its comment excluded) to its closing brace, both counted.
# Member functions defined inside a class body and lambdas are not measured
# on their own: they count toward their file's 700 lines only.
#
# Usage: sizes.sh REPOSITORY_ROOT
set -euo pipefail
root=${1:?usage: sizes.sh REPOSITORY_ROOT}
cd "$root"

folders=()
for cmake in */CMakeLists.txt; do
  folder=${cmake%/CMakeLists.txt}
  [ "$folder" = tests ] && continue
  grep -q '^[[:space:]]*fencepost_layer(' "$cmake" && folders+=("$folder")
done
if [ "${#folders[@]}" -eq 0 ]; then
  echo "no folder calls fencepost_layer under $root: wrong root?" >&2
  exit 1
fi

exec python3 - "${folders[@]}" <<'EOF'
import pathlib
import re
import sys

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 80
FUNCTION_FOLDERS = {"fence", "storage", "proxy"}


def blank(text):
    """The code of `text` with comments, literals and preprocessor lines
    replaced by spaces (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)

    def keep_newlines(s):
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(keep_newlines(text[i:j]))
            i = j
        elif c == '"' and re.search(r"(^|[^\w])(u8|u|U|L)?R$", text[max(0, i - 3):i]):
            m = re.match(r'"([^(\s]*)\(', text[i:])
            end = ")" + (m.group(1) if m else "") + '"'
            j = text.find(end, i + 1)
            j = n if j < 0 else j + len(end)
            out.append('"' + keep_newlines(text[i + 1:j - 1]) + '"')
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isdigit())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if j < n and text[j] == c:
                j += 1
            out.append(c + " " * (j - i - 1))
            i = j
        else:
            out.append(c)
            i += 1
    lines = "".join(out).split("\n")
    continued = False
    for k, line in enumerate(lines):
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            lines[k] = ""
    return lines


def is_function(statement):
    s = statement.strip()
    if not s or "(" not in s:
        return False
    if re.match(r"(template\s*<.*>\s*)?(class|struct|enum|union)\b", s):
        return False
    depth = 0
    flat = re.sub(r"\boperator\s*[^\s(]+", "operator", s)
    for k, c in enumerate(flat):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and c == "=" and flat[k + 1:k + 2] != "=" and \
                flat[k - 1:k] not in ("=", "!", "<", ">"):
            return False
    return True


def name_of(statement):
    statement = re.sub(r"__attribute__\s*\(\(.*?\)\)|\[\[.*?\]\]", "",
                       statement)
    head = statement.split("(", 1)[0]
    m = re.search(r"(operator\s*\S*|[\w:~]+)\s*$", head)
    return m.group(1) if m else "?"


def long_functions(lines):
    """(first line, name, length) of each function over the limit."""
    found = []
    stack = []  # "ns", "fn" or "other" per open brace
    statement, start = "", None
    fn_start, fn_name = None, None
    for number, line in enumerate(lines, 1):
        for k, c in enumerate(line):
            at_top = all(kind == "ns" for kind in stack)
            if c == "{":
                if at_top and fn_start is not None:
                    stack.append("fn")  # the body after brace initializers
                elif at_top and re.match(r'(inline\s+)?namespace\b|extern\s*"[^"]*"\s*$',
                                         statement.strip()):
                    stack.append("ns")
                elif at_top and is_function(statement):
                    stack.append("fn")
                    fn_start, fn_name = start or number, name_of(statement)
                else:
                    stack.append("other")
                statement, start = "", None
            elif c == "}":
                kind = stack.pop() if stack else "ns"
                if kind == "fn" and all(x == "ns" for x in stack):
                    rest = line[k + 1:] + "".join(lines[number:number + 3])
                    if rest.lstrip()[:1] in (",", "{"):
                        continue  # a brace initializer of a constructor
                    length = number - fn_start + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append((fn_start, fn_name, length))
                    fn_start = None
                statement, start = "", None
            elif c == ";" and at_top:
                statement, start = "", None
            elif at_top and not c.isspace():
                if start is None:
                    start = number
                statement += c
            elif at_top:
                statement += " "
    return found


status = 0
files = 0
for folder in sys.argv[1:]:
    paths = sorted(p for p in pathlib.Path(folder).rglob("*")
                   if p.suffix in (".h", ".cc") and p.is_file())
    for path in paths:
        files += 1
        text = path.read_text(encoding="utf-8", errors="replace")
        count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if count > MAX_FILE_LINES:
            print(f"{path}: {count} lines (at most {MAX_FILE_LINES})")
            status = 1
        if folder in FUNCTION_FOLDERS:
            for first, name, length in long_functions(blank(text)):
                print(f"{path}:{first}: {name} is {length} lines "
                      f"(at most {MAX_FUNCTION_LINES})")
                status = 1
if status == 0:
    print(f"{files} files in {', '.join(sys.argv[1:])}: within "
          f"{MAX_FILE_LINES} lines, functions within {MAX_FUNCTION_LINES}")
sys.exit(status)
EOF
