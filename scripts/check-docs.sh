#!/usr/bin/env bash
# check-docs.sh [ROOT]: checks README.md and every docs/**/*.md under ROOT
# (default: this repository) and exits 1 when one of them
#   - links to a file or folder that does not exist in the repository
#     (relative links, and /links from the repository root; http(s):// and
#     mailto: links are not fetched),
#   - links to a #heading that the target page does not have, or
#   - mentions a file outside the repository (../shared, SEMANTICS.md,
#     ANCHORS.md): the docs must be readable from a clone alone.
# `make test` runs it through the test in internal/docscheck.
set -euo pipefail
export LC_ALL=C

root=$(cd "${1:-$(dirname "$0")/..}" && pwd -P)
cd "$root"

docs=(README.md)
if [ -d docs ]; then
	while IFS= read -r f; do docs+=("$f"); done < <(find docs -name '*.md' | sort)
fi

problems=0
problem() {
	echo "$1" >&2
	problems=$((problems + 1))
}

# anchors FILE: the #fragments GitHub gives FILE's headings, one per line:
# lower case, punctuation dropped, spaces as '-', a repeated heading -1, -2, …
anchors() {
	awk '
		/^[ \t]*(```|~~~)/ { fence = !fence; next }
		fence { next }
		/^#+[ \t]/ {
			h = $0
			sub(/^#+[ \t]+/, "", h); sub(/[ \t#]+$/, "", h)
			h = tolower(h)
			gsub(/[^a-z0-9 _-]/, "", h)
			gsub(/ /, "-", h)
			if (h in seen) { seen[h]++; print h "-" seen[h] } else { seen[h] = 0; print h }
		}' "$1"
}

# links FILE: "LINE<TAB>TARGET" for every inline link or image and every
# reference definition outside code fences and inline code.
links() {
	awk '
		/^[ \t]*(```|~~~)/ { fence = !fence; next }
		fence { next }
		{
			line = $0
			gsub(/`[^`]*`/, "", line)
			if (match(line, /^[ \t]*\[[^]]+\]:[ \t]+[^ \t]+/)) {
				def = substr(line, RSTART, RLENGTH); sub(/^[ \t]*\[[^]]+\]:[ \t]+/, "", def)
				print NR "\t" def
			}
			while (match(line, /\]\([^)]*\)/)) {
				t = substr(line, RSTART + 2, RLENGTH - 3)
				line = substr(line, RSTART + RLENGTH)
				sub(/^[ \t]*</, "", t); sub(/>.*$/, "", t); sub(/[ \t].*$/, "", t)
				print NR "\t" t
			}
		}' "$1"
}

for doc in "${docs[@]}"; do
	dir=$(dirname "$doc")
	while IFS=$'\t' read -r line target; do
		case "$target" in
		"" | [a-zA-Z]*:*) continue ;; # a URL (https:, mailto:): not checked here
		esac
		path=${target%%#*}
		frag=
		[[ $target == *"#"* ]] && frag=${target#*#}
		if [ -z "$path" ]; then
			file=$doc
		elif [[ $path == /* ]]; then
			file=${path#/}
		else
			file=$dir/$path
		fi
		resolved=$(realpath -m "$file")
		if [[ $resolved != "$root" && $resolved != "$root"/* ]]; then
			problem "$doc:$line: link $target leaves the repository"
			continue
		fi
		if [ ! -e "$resolved" ]; then
			problem "$doc:$line: link $target: no such file in the repository"
			continue
		fi
		if [ -n "$frag" ] && [[ $resolved == *.md ]] && ! anchors "$resolved" | grep -qxF -- "$frag"; then
			problem "$doc:$line: link $target: ${path:-this page} has no heading #$frag"
		fi
	done < <(links "$doc")
done

# Files that live beside a checkout, never in it.
while IFS= read -r hit; do
	problem "$hit: mentions a file outside the repository"
done < <(grep -nE '\.\./shared|SEMANTICS\.md|ANCHORS\.md' "${docs[@]}" || true)

if [ "$problems" -gt 0 ]; then
	echo "check-docs: $problems problem(s) in README.md and docs/" >&2
	exit 1
fi
echo "check-docs: ${#docs[@]} files, every link resolves"
