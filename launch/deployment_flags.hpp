#pragma once
// The model, memory and parallelism flags (sglang's names) that aerie-generate and
// aerie-serve share, registered once on either command line.
#include <CLI/CLI.hpp>

#include "launch/deployment.hpp"

namespace aerie::launch {

// max_total_tokens_help: what 0 means for this program.
void add_deployment_flags(CLI::App& app, DeploymentOptions& d, const std::string& max_total_tokens_help);

// Checks what only the parsed values together can get wrong (throws aerie::Error) and
// fills the values derived from others (--speculative-num-draft-tokens).
void check_deployment_flags(DeploymentOptions& d);

}  // namespace aerie::launch
