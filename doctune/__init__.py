"""doctune's command (``doctune search|study|report|evaluate``); the driver itself is ``platform``."""
