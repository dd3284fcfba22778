// The modules of a build request: `tvmffi-jit build -m a.json -m b.json`, a
// directory or a glob of manifests, or a "modules" manifest listing many,
// expanded into one list of manifests, every one read and checked before
// anything is built (docs/build.md#batch-builds). Running them is the
// scheduler's (compile/scheduler.h).
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/manifest.h"

namespace tvmffi_jit::compile {

struct BatchInput {
  std::string origin;  // where it was read: "a.json", "mods.json#/modules/3"
  Manifest manifest;
  // Set when the manifest could not be read or checked and the caller asked
  // to keep going: the message (naming the manifest), exit code 2. The module
  // is reported as failed; `manifest` is empty but for its name (the file's
  // stem), which the report shows.
  std::string error;
};

struct ExpandedManifests {
  // More than one module, or any argument that names many (a directory, a
  // glob, a "modules" manifest): the caller builds a batch even of one.
  bool batch = false;
  std::vector<BatchInput> modules;
};

// The -m arguments, each one of:
//   a manifest file;
//   a directory: its *.json files (not recursive, sorted by name);
//   a glob pattern (*, ?, [...]) matching manifest files;
//   a "modules" manifest: {"modules": [entry, ...]} where an entry is a path
//     or glob (relative to that file, possibly another modules manifest) or
//     an inline manifest object.
// The same file reached twice is built once. Two modules with one name are an
// error, as is a pattern or directory that matches nothing. Throws
// ManifestError / Error(kUsage) (exit 2).
//
// With `keep_going`, a manifest file or inline entry that does not parse or
// check becomes a module with `error` set instead of ending the expansion (a
// path that matches nothing, a modules manifest of the wrong shape and two
// modules with one name still throw: they are about the batch, not a module).
ExpandedManifests expand_manifest_arguments(const std::vector<std::string>& arguments, bool keep_going = false);

}  // namespace tvmffi_jit::compile
