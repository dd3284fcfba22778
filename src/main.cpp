#include "tvmffi_jit/cli/app.h"

int main(int argc, char** argv) { return tvmffi_jit::cli::run(argc, argv); }
