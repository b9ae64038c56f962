#!/usr/bin/env bash
# Fails when a Go file of the repository lacks the license header of
# hack/boilerplate.go.txt. Generated files get it from the generators; a
# build constraint may stand before it.
set -euo pipefail
cd "$(dirname "$0")/.."

header=hack/boilerplate.go.txt
lines=$(grep -c '' "$header")
status=0
while IFS= read -r file; do
	if [[ $(head -n 1 "$file") == //go:build* ]]; then
		start=3
	else
		start=1
	fi
	if ! cmp -s <(tail -n "+$start" "$file" | head -n "$lines") "$header"; then
		echo "missing license header: $file"
		status=1
	fi
done < <(git ls-files --cached --others --exclude-standard -- '*.go')
if [ "$status" -ne 0 ]; then
	echo "prepend hack/boilerplate.go.txt to the files above (generated files: make generate)"
fi
exit "$status"
