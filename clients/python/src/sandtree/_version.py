# Set by scripts/bump-version.mjs together with pyproject.toml and every package.json.
__version__ = "0.1.0"
