#include "tools/model_source.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/files.h"
#include "engine/run_dir.h"

namespace bertrain {

void add_model_source_flags(ArgParser& p, const std::string& mlflow_dir_help, const std::string& experiment_help) {
  p.option("model", "", "RUN_DIR (uses its best/) or a model directory (this or --run-id)").value_name("DIR");
  p.option("run-id", "", "the model the FINISHED MLflow run ID logged (its artifact model/, or best/ for runs "
                         "logged by older bertrain), in the store of --mlflow-dir (this or --model)")
      .value_name("ID");
  p.option("mlflow-dir", "", mlflow_dir_help + "; a folder or a file: URI (file:///abs/path, file:rel/path); "
                             "default: MLFLOW_TRACKING_URI when set")
      .value_name("DIR");
  p.option("experiment", "", experiment_help).value_name("NAME");
}

ModelSource model_source(const ArgParser& p) {
  const bool by_run = p.given("run-id"), by_model = p.given("model");
  if (by_run == by_model) throw UsageError(p.command() + ": give one of --model DIR and --run-id ID");
  ModelSource source;
  source.store = input_step([&] { return mlflow_store(p.given("mlflow-dir"), p.get("mlflow-dir")); });
  if (by_model) {
    if (p.get("model").empty()) throw UsageError(p.command() + ": --model is empty");
    source.path = p.get("model");
    return source;
  }
  if (source.store.dir.empty()) {
    throw UsageError(p.command() + ": --run-id " + p.get("run-id") + " needs the MLflow file store it is in: "
                     "--mlflow-dir DIR or MLFLOW_TRACKING_URI");
  }
  input_step([&] {
    source.run = find_mlflow_run(source.store.dir, p.get("run-id"), p.get("experiment"));
    source.path = mlflow_run_model_dir(*source.run);
  });
  return source;
}

void check_out_spares_inputs(const std::string& out, const std::string& data, const ModelSource& source) {
  input_step([&] {
    check_writable_file(out, "--out", {data});
    // The file --out is, named as --out names it where it can be: best/ and last/ may share their weights file.
    std::string same;
    for (const std::string& file : model_and_run_files(source.path)) {
      std::error_code ignored;
      if (!std::filesystem::equivalent(out, file, ignored)) continue;
      if (same.empty() || std::filesystem::weakly_canonical(file, ignored) ==
                              std::filesystem::weakly_canonical(out, ignored)) {
        same = file;
      }
    }
    BERTRAIN_CHECK(same.empty(), "--out '" << out << "' is '" << same << "', a file of the model read or of its run, "
                                           << "which writing it would replace: write to another file");
  });
}

}  // namespace bertrain
