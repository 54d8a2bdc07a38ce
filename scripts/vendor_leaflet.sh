#!/usr/bin/env bash
# Re-vendor Leaflet (BSD-2-Clause) for the web app's interactive map from the npm registry.
# The page loads nothing from the internet, so the two files it needs ship inside the package,
# under src/geosleuth/webapp/static/vendor/leaflet/. Run this only to change the version; the
# checksums below are those of the committed files, so an edit by hand is caught.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.9.4
DEST=src/geosleuth/webapp/static/vendor/leaflet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "leaflet@$VERSION" >/dev/null && tar xzf "leaflet-$VERSION.tgz")
mkdir -p "$DEST"
cp "$work/package/dist/leaflet.js" "$work/package/dist/leaflet.css" "$work/package/LICENSE" "$DEST/"
(cd "$DEST" && sha256sum -c - <<'SUMS'
db49d009c841f5ca34a888c96511ae936fd9f5533e90d8b2c4d57596f4e5641a  leaflet.js
a7837102824184820dfa198d1ebcd109ff6d0ff9a2672a074b9a1b4d147d04c6  leaflet.css
53e8dc25862014e4324741ca18fbe3611e11d42ef69f59f86ea8c5389647d4cb  LICENSE
SUMS
)
echo "Leaflet $VERSION vendored into $DEST"
