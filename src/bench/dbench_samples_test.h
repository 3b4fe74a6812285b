// dbench 4.0 output captured on this project's machine (Debian 12, dbench 4.0-2.1), kept
// verbatim so the parser is tested on what dbench really prints.
#pragma once

namespace volstack::bench::testdata {

// `dbench -t 3 -D /tmp/dbcap 2` on a plain directory: no warmup line, and the harmless
// "failed to create barrier semaphore" message.
inline constexpr const char* kDbenchShortRun =
    R"DBENCH(dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 3 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 0 secs
failed to create barrier semaphore 
0 of 2 processes prepared for launch   0 sec
2 of 2 processes prepared for launch   0 sec
releasing clients
   2     40113   465.51 MB/sec  execute   1 sec  latency 5.341 ms
   2     82382   461.15 MB/sec  execute   2 sec  latency 6.910 ms
   2  cleanup   3 sec
   0  cleanup   3 sec

 Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX      43076     0.029     4.211
 Close          31715     0.002     0.835
 Rename          1826     0.038     0.768
 Unlink          8626     0.085     4.970
 Deltree            2     0.076     0.117
 Mkdir              2     2.023     3.874
 Qpathinfo      38973     0.009     3.623
 Qfileinfo       6949     0.001     0.182
 Qfsinfo         7144     0.003     1.318
 Sfileinfo       3534     0.009     0.863
 Find           15077     0.030     2.099
 WriteX         22062     0.018     4.144
 ReadX          67491     0.003     0.908
 LockX            140     0.004     0.056
 UnlockX          140     0.002     0.003
 Flush           3036     0.617     6.897

Throughput 461.145 MB/sec  2 clients  2 procs  max_latency=6.910 ms
)DBENCH";

// `dbench -t 12 -D /tmp/dbcap 2`: a warmup line, then execute lines, then the report.
inline constexpr const char* kDbenchWarmupRun =
    R"DBENCH(dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 12 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 2 secs
0 of 2 processes prepared for launch   0 sec
2 of 2 processes prepared for launch   0 sec
releasing clients
   2     33109   391.44 MB/sec  warmup   1 sec  latency 4.774 ms
   2    100024   354.76 MB/sec  execute   1 sec  latency 6.842 ms
   2    131595   347.80 MB/sec  execute   2 sec  latency 7.231 ms
   2    165662   354.60 MB/sec  execute   3 sec  latency 4.401 ms
   2    195494   346.81 MB/sec  execute   4 sec  latency 7.938 ms
   2    231822   355.02 MB/sec  execute   5 sec  latency 10.395 ms
   2    271582   367.10 MB/sec  execute   6 sec  latency 5.111 ms
   2    311895   377.42 MB/sec  execute   7 sec  latency 5.033 ms
   2    348866   379.83 MB/sec  execute   8 sec  latency 5.523 ms
   2    386959   383.68 MB/sec  execute   9 sec  latency 5.065 ms
   2    417937   378.07 MB/sec  execute  10 sec  latency 7.022 ms
   2    457255   383.77 MB/sec  execute  11 sec  latency 5.236 ms
   2  cleanup  12 sec
   0  cleanup  12 sec

 Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX     147644     0.060     7.016
 Close         108432     0.002     4.081
 Rename          6253     0.037     3.143
 Unlink         29813     0.079     5.071
 Deltree            4     1.968     3.839
 Mkdir              2     0.004     0.004
 Qpathinfo     133781     0.008     4.096
 Qfileinfo      23458     0.001     2.257
 Qfsinfo        24550     0.003     1.345
 Sfileinfo      12009     0.008     2.552
 Find           51736     0.029     4.479
 WriteX         73652     0.016     4.124
 ReadX         231627     0.003     4.070
 LockX            482     0.004     0.036
 UnlockX          482     0.002     0.047
 Flush          10331     0.571    10.386

Throughput 383.77 MB/sec  2 clients  2 procs  max_latency=10.395 ms
)DBENCH";

}  // namespace volstack::bench::testdata
