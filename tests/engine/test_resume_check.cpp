// Honest resume (engine/resume_check.h): which setting changes a --resume refuses, and how it names them.
#include <gtest/gtest.h>

#include "engine/resume_check.h"
#include "engine/train_args.h"

namespace bertrain {
namespace {

using nlohmann::json;

json recorded() {
  TrainArgs a;
  a.model_dir = "models/m";
  a.train_data = "data/train.csv";
  a.out_dir = "runs/a";
  json p = train_args_json(a);
  p["train_data_hash"] = "fnv1a64:0000000000000001:10";
  p["world_size"] = 1;
  p["engine"] = "cpu (2 threads, fp32)";
  return p;
}

TEST(ResumeCheck, TheSameCommandHasNoDifferences) {
  const json r = recorded();
  EXPECT_TRUE(resume_differences(r, r, train_args_json(TrainArgs{})).empty());
  EXPECT_TRUE(resumable_changes(r, r).empty());
}

TEST(ResumeCheck, TrainingSettingsThatDifferAreNamedOnePerLine) {
  const json r = recorded();
  json now = r;
  now["lr"] = 5e-5;
  now["batch_size"] = 64;
  now["train_data_hash"] = "fnv1a64:0000000000000002:10";
  now["lr_scheduler"] = "cosine";
  const std::vector<std::string> d = resume_differences(r, now, train_args_json(TrainArgs{}));
  ASSERT_EQ(d.size(), 4u);
  const std::string all = d[0] + "\n" + d[1] + "\n" + d[2] + "\n" + d[3];
  EXPECT_NE(all.find("--lr 0.0001 (checkpoint) vs 5e-05 (now)"), std::string::npos) << all;
  EXPECT_NE(all.find("--batch-size 256 (checkpoint) vs 64 (now)"), std::string::npos) << all;
  EXPECT_NE(all.find("--train-data content"), std::string::npos) << all;
  EXPECT_NE(all.find("--lr-scheduler \"plateau\" (checkpoint) vs \"cosine\" (now)"), std::string::npos) << all;
}

TEST(ResumeCheck, ResumableSettingsMayChangeAndAreRecorded) {
  const json r = recorded();
  json now = r;
  now["epochs"] = 12;
  now["threads"] = 4;
  now["device"] = "cpu";
  now["train_data"] = "elsewhere/train.csv";  // moved, same content (same hash)
  now["engine"] = "cpu (4 threads, fp32)";
  EXPECT_TRUE(resume_differences(r, now, train_args_json(TrainArgs{})).empty());
  const json changes = resumable_changes(r, now);
  EXPECT_EQ(changes.at("epochs"), json::array({10, 12}));
  EXPECT_EQ(changes.at("threads"), json::array({0, 4}));
  EXPECT_EQ(changes.at("train_data"), json::array({"data/train.csv", "elsewhere/train.csv"}));
  EXPECT_FALSE(changes.contains("engine"));  // a description, not a setting
}

TEST(ResumeCheck, NumbersCompareAsNumbers) {
  const json r = recorded();
  json now = r;
  now["lr"] = 0.0001;   // 1e-4 written another way
  now["dropout"] = 0.5;
  EXPECT_TRUE(resume_differences(r, now, train_args_json(TrainArgs{})).empty());
}

// A checkpoint from before a setting existed recorded none: it ran with the default of that time.
TEST(ResumeCheck, ASettingTheCheckpointDidNotRecordIsItsDefault) {
  json r = recorded();
  r.erase("grad_accum_steps");
  r.erase("lr_scheduler");
  json now = recorded();
  EXPECT_TRUE(resume_differences(r, now, train_args_json(TrainArgs{})).empty());
  now["grad_accum_steps"] = 4;
  const std::vector<std::string> d = resume_differences(r, now, train_args_json(TrainArgs{}));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "--grad-accum-steps 1 (checkpoint) vs 4 (now)");
}

}  // namespace
}  // namespace bertrain
