// The pieces of the compiled Python module folio._folio.
//
// module.cc creates the module and calls one Bind* function per file, so
// each folio module's bindings live in their own file (attention.cc,
// format.cc, snapshot.cc, llm.cc) and share the error translation below.
#ifndef FOLIO_PYTHON_BINDINGS_H_
#define FOLIO_PYTHON_BINDINGS_H_

#include <nanobind/nanobind.h>

#include "folio/core/status.h"

namespace folio::python {

// Raises the Python exception that matches a non-ok Status, with its
// message; returns normally on ok. InvalidArgument, OutOfRange, Corruption
// and FailedPrecondition become ValueError, Unimplemented
// NotImplementedError, NotFound KeyError, IoError OSError, anything else
// RuntimeError. Exceptions exist only here, at the edge (STYLE.md, Errors).
void ThrowIfError(const Status& status);
// Loading a model: as ThrowIfError, but NotFound (no such file, a missing
// file or key in a model folder) raises FileNotFoundError.
void ThrowIfModelError(const Status& status);
// Refusing a request (its prompt or parameters, a request that could never
// fit the KV pool or the model's context): ValueError whatever the code,
// since the request is what is wrong, not the engine.
void ThrowIfRequestError(const Status& status);

// folio.paged_attention (attention.cc).
void BindAttention(nanobind::module_& m);

// folio's Hurray descriptors (format.cc): BlockPagedLayout, RowMajorLayout,
// StridedLayout, PerTensorAffine / PerChannelAffine / PerBlockAffine,
// ElementType and its members (folio.float32, ...), BufferHandle,
// TensorDescriptor and InvalidDescriptorError. Every Status these bindings
// see raises InvalidDescriptorError (a ValueError), not ThrowIfError's
// mapping, so one except clause catches every refusal of a descriptor.
void BindFormat(nanobind::module_& m);

// folio.read_snapshot and folio.KvSnapshot (snapshot.cc): KV snapshot files
// with their pages as NumPy arrays.
void BindSnapshot(nanobind::module_& m);

// folio._folio.EngineCore (llm.cc): a loaded model, its tokenizer and chat
// prompt, an engine and the engine's own thread (serving/engine_thread.h); the
// pure-Python folio.LLM and folio.AsyncLLM are built on it.
void BindLlm(nanobind::module_& m);

// folio._folio.render_chat_template (chat.cc): a template's source rendered
// by folio's Jinja engine, for folio.apply_chat_template; and
// ChatOutputReader, which reads LLM.chat's replies into content,
// reasoning_content and tool_calls as folio serve does.
void BindChat(nanobind::module_& m);
// folio._folio.apply_logits_processors and sampling_candidates
// (sampling.cc): the sampling module on one row, for the oracle tests.
void BindSampling(nanobind::module_& m);
// FrontEnd: folio serve's request and response layers for a front end
// whose engines run elsewhere (frontend.cc).
void BindFrontEnd(nanobind::module_& m);

}  // namespace folio::python

#endif  // FOLIO_PYTHON_BINDINGS_H_
