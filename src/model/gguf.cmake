set(FOLIO_GGUF_SOURCES gguf.cc)
set(FOLIO_GGUF_TESTS gguf_test.cc)
