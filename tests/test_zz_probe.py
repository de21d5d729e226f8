import time
from helpers import here, rows, DATASET
def test_async_inprocess_twice(tmp_path, capsys, data_root):
    for i in range(2):
        t = time.perf_counter()
        rc, err = here(["train", "--dataset", DATASET, "--method", "digest-async", "--workers", 1, "--hidden", 8,
                        "--epochs", 4, "--sync-interval", 2, "--no-progress", "--out", tmp_path / f"r{i}"], capsys)
        print(i, rc, err, time.perf_counter() - t)
        assert rc == 0
    assert rows(tmp_path / "r0" / "metrics.csv")[-1]["train_loss"] == rows(tmp_path / "r1" / "metrics.csv")[-1]["train_loss"]
def test_exact_2w(tmp_path, capsys, data_root):
    for i in range(2):
        t = time.perf_counter()
        rc, err = here(["train", "--dataset", DATASET, "--method", "digest", "--workers", 2, "--hidden", 8,
                        "--epochs", 6, "--sync-interval", 2, "--no-progress", "--out", tmp_path / f"r{i}"], capsys)
        print(i, rc, err, time.perf_counter() - t)
        assert rc == 0
