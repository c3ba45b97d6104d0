# The libFuzzer targets, one list for the fuzz build (tests/fuzz/CMakeLists.txt), the corpus replays of the normal
# suite (tests/CMakeLists.txt) and ./bertrain.sh fuzz (which reads the list the fuzz build writes). Each has its
# source tests/fuzz/<target>.cpp and its seeds in tests/fuzz/corpus/<target>/.
set(BERTRAIN_FUZZ_TARGETS fuzz_safetensors fuzz_config fuzz_vocab fuzz_csv fuzz_records fuzz_torch_checkpoint
    fuzz_tokenizer_json fuzz_tokenizer_files fuzz_encode_text fuzz_serve_requests fuzz_http_request)
