from pathlib import Path

# the project's configs
CONFIGS = Path(__file__).resolve().parents[1] / 'configs'
