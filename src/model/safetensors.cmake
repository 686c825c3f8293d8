set(FOLIO_SAFETENSORS_SOURCES safetensors.cc)
set(FOLIO_SAFETENSORS_TESTS safetensors_test.cc)
