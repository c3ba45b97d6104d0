// engine/mlflow_model.h and the MlflowRun tags: the best checkpoint logged as the MLflow Model artifacts/model
// (its files hard links to the checkpoint's, which outlive the checkpoint being replaced; copies with a note across
// filesystems), the MLmodel file, the run's mlflow.log-model.history, MLflow's script tags, the user.
#include "engine/mlflow_model.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/atomic_file.h"
#include "core/build_info.h"
#include "core/files.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const std::string& path) { return read_file(path, "test file"); }

void spit(const std::string& path, const std::string& text) { write_file_atomically(path, text); }

ino_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

// A checkpoint folder as save_model_dir writes it (the weights' bytes stand for themselves here).
void write_checkpoint(const std::string& dir, const std::string& weights) {
  make_directories(dir);
  spit(dir + "/config.json",
       json{{"architectures", {"BertForSequenceClassification"}},
            {"id2label", {{"1", "mlops"}, {"0", "computer-vision"}, {"2", "it's other"}}},
            {"problem_type", "multi_label_classification"}}
           .dump());
  spit(dir + "/model.safetensors", weights);
  spit(dir + "/vocab.txt", "[PAD]\n[UNK]\n");
}

class MlflowModelTest : public ::testing::Test {
 protected:
  testing::TempDir temp_{"bertrain_mlflow_model"};
  const std::string best_ = temp_.path("run/best");
};

TEST_F(MlflowModelTest, TheModelIsHardLinkedAndOutlivesItsCheckpoint) {
  make_directories(temp_.path("run"));
  replace_directory_atomically(best_, [](const std::string& dir) { write_checkpoint(dir, "epoch 1 weights"); });
  MlflowRun run(temp_.path("mlruns"), "e", "r", "");
  const MlflowModelInfo model = log_mlflow_model(run, best_);
  const std::string logged = run.artifacts_dir() + "/model";
  for (const char* name : {"config.json", "model.safetensors", "vocab.txt"}) {
    EXPECT_EQ(inode_of(logged + "/" + name), inode_of(best_ + "/" + name)) << name << " is a copy, not a link";
  }
  EXPECT_EQ(model.model_size_bytes, static_cast<int64_t>(fs::file_size(best_ + "/config.json") +
                                                         fs::file_size(best_ + "/vocab.txt") + 15));
  // best/ replaced by a better epoch, as the trainer does: the logged model keeps the epoch it logged.
  replace_directory_atomically(best_, [](const std::string& dir) { write_checkpoint(dir, "epoch 2 weights"); });
  EXPECT_EQ(slurp(logged + "/model.safetensors"), "epoch 1 weights");
  EXPECT_NE(inode_of(logged + "/model.safetensors"), inode_of(best_ + "/model.safetensors"));
  remove_tree(temp_.path("run"));
  EXPECT_EQ(slurp(logged + "/model.safetensors"), "epoch 1 weights");
}

TEST_F(MlflowModelTest, TheMlmodelFileAndTheLoggedModelHistory) {
  write_checkpoint(best_, "w");
  MlflowRun run(temp_.path("mlruns"), "e", "r", "");
  const MlflowModelInfo first = log_mlflow_model(run, best_);
  EXPECT_EQ(first.labels, (std::vector<std::string>{"computer-vision", "mlops", "it's other"}));
  EXPECT_EQ(first.problem_type, "multi_label_classification");
  EXPECT_EQ(first.transformers_class, "BertForSequenceClassification");
  EXPECT_EQ(first.model_uuid.size(), 32u);
  EXPECT_EQ(first.model_uuid[12], '4');
  EXPECT_EQ(first.utc_time_created.size(), 26u) << first.utc_time_created;  // "YYYY-MM-DD HH:MM:SS.ffffff"
  const std::string mlmodel = slurp(run.artifacts_dir() + "/model/MLmodel");
  EXPECT_EQ(mlmodel, mlmodel_yaml(first));
  EXPECT_EQ(mlmodel,
            "artifact_path: 'model'\n"
            "flavors:\n"
            "  bertrain:\n"
            "    bertrain_version: '" + build_version() + "'\n"
            "    labels:\n"
            "    - 'computer-vision'\n"
            "    - 'mlops'\n"
            "    - 'it''s other'\n"
            "    problem_type: 'multi_label_classification'\n"
            "    transformers_class: 'BertForSequenceClassification'\n"
            "model_size_bytes: " + std::to_string(first.model_size_bytes) + "\n"
            "model_uuid: '" + first.model_uuid + "'\n"
            "run_id: '" + run.run_id() + "'\n"
            "utc_time_created: '" + first.utc_time_created + "'\n");
  // Logged again (a resumed run that finishes again): the folder replaced, the history appended, as MLflow does.
  const MlflowModelInfo second = log_mlflow_model(run, best_);
  EXPECT_NE(second.model_uuid, first.model_uuid);
  EXPECT_EQ(slurp(run.artifacts_dir() + "/model/MLmodel"), mlmodel_yaml(second));
  const json history = json::parse(run.tag("mlflow.log-model.history"));
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0]["model_uuid"], first.model_uuid);
  EXPECT_EQ(history[1]["model_uuid"], second.model_uuid);
  EXPECT_EQ(history[1]["run_id"], run.run_id());
  EXPECT_EQ(history[1]["artifact_path"], "model");
  EXPECT_EQ(history[1]["flavors"]["bertrain"]["labels"][2], "it's other");
  EXPECT_FALSE(history[1].contains("model_size_bytes"));  // MLflow's get_tags_dict leaves it out
  for (const auto& entry : fs::directory_iterator(run.artifacts_dir())) {
    EXPECT_EQ(entry.path().filename(), "model") << "left behind: " << entry.path();
  }
}

// A store on another filesystem than the checkpoint (/dev/shm, when it is one): copies, and a note says so.
TEST_F(MlflowModelTest, AcrossFilesystemsTheModelIsCopiedWithANote) {
  struct stat here {}, shm {};
  if (::stat(temp_.path().c_str(), &here) != 0 || ::stat("/dev/shm", &shm) != 0 || here.st_dev == shm.st_dev) {
    GTEST_SKIP() << "no /dev/shm on another filesystem than " << temp_.path();
  }
  char pattern[] = "/dev/shm/bertrain_mlflow_XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  write_checkpoint(best_, "weights");
  MlflowRun run(std::string(pattern) + "/mlruns", "e", "r", "");
  ::testing::internal::CaptureStderr();
  log_mlflow_model(run, best_);
  const std::string note = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(note.find("not hard-linked"), std::string::npos) << note;
  EXPECT_EQ(slurp(run.artifacts_dir() + "/model/model.safetensors"), "weights");
  EXPECT_NE(inode_of(run.artifacts_dir() + "/model/model.safetensors"), inode_of(best_ + "/model.safetensors"));
  remove_tree(pattern);
}

// A new run's tags, as MLflow sets them for a script: runName, user, source name (argv[0]), type and commit.
TEST_F(MlflowModelTest, ANewRunHasMlflowsScriptTags) {
  MlflowRun run(temp_.path("mlruns"), "e", "my run", "");
  EXPECT_EQ(run.tag("mlflow.runName"), "my run");
  EXPECT_EQ(run.tag("mlflow.user"), mlflow_user());
  EXPECT_EQ(run.tag("mlflow.source.type"), "LOCAL");
  std::ifstream cmdline("/proc/self/cmdline");
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  EXPECT_EQ(run.tag("mlflow.source.name"), argv0);
  EXPECT_EQ(run.tag("mlflow.source.git.commit"), build_git_commit());  // "" (no tag) when the build has none
  EXPECT_EQ(run.tag("no.such.tag"), "");
  EXPECT_NE(slurp(run.run_dir() + "/meta.yaml").find("user_id: '" + mlflow_user() + "'"), std::string::npos);
}

// getpass.getuser's order: LOGNAME, USER, LNAME, USERNAME, then the password database.
TEST(MlflowUser, EnvironmentFirstThenThePasswordDatabase) {
  const char* names[] = {"LOGNAME", "USER", "LNAME", "USERNAME"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) saved.emplace_back(name, value);
    ::unsetenv(name);
  }
  ::setenv("USER", "second", 1);
  ::setenv("USERNAME", "fourth", 1);
  EXPECT_EQ(mlflow_user(), "second");
  ::setenv("LOGNAME", "first", 1);
  EXPECT_EQ(mlflow_user(), "first");
  for (const char* name : names) ::unsetenv(name);
  const passwd* entry = ::getpwuid(::getuid());
  EXPECT_EQ(mlflow_user(), entry != nullptr ? entry->pw_name : "unknown");
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace
}  // namespace bertrain
