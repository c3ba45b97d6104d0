#include "data/dataset.h"

#include "core/error.h"
#include "data/csv.h"
#include "data/text_clean.h"

namespace bertrain {

Example encode_text(const std::string& title, const std::string& description, const BertTokenizer& tokenizer,
                    const DatasetOptions& options, bool* truncated) {
  const std::string text = title + " " + description;
  Encoding encoding = tokenizer.encode(options.clean ? clean_text(text) : text, options.max_length);
  if (truncated != nullptr) *truncated = encoding.truncated;
  Example example;
  example.ids = std::move(encoding.ids);
  return example;
}

TextDataset load_text_dataset(const std::string& path, const BertTokenizer& tokenizer, const LabelSet* labels,
                              const DatasetOptions& options) {
  const CsvTable table = read_csv(path);
  const int title = table.require_column("title");
  const int description = table.require_column("description");
  const int tag = options.require_tags ? table.require_column("tag") : table.column("tag");
  const int id = table.column("id");
  BERTRAIN_CHECK(!table.rows.empty(), path << ": no data rows");

  TextDataset data;
  data.source = path;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const std::vector<std::string>& row = table.rows[r];
    data.ids.push_back(id >= 0 ? row[id] : std::to_string(r));
    data.raw_text.push_back(row[title] + " " + row[description]);
    data.tags.push_back(tag >= 0 ? row[tag] : std::string());
    if (options.require_tags) {
      BERTRAIN_CHECK(!data.tags.back().empty(), path << ":" << table.row_lines[r] << ": empty tag");
    }
    bool truncated = false;
    Example example = encode_text(row[title], row[description], tokenizer, options, &truncated);
    data.truncated += truncated ? 1 : 0;
    if (labels != nullptr && !data.tags.back().empty()) {
      example.label = labels->require(data.tags.back(), path + ":" + std::to_string(table.row_lines[r]));
    }
    data.examples.push_back(std::move(example));
  }
  return data;
}

}  // namespace bertrain
