"""Layer 1, data in: GloVe sources, downloads, text parsing and the binary store; sentences and the tokenizer; the checks of
every file the config names (input_files)."""
