"""One module per method: ``wcsph`` (Tait EOS, leap-frog; seed 000 §3)."""
