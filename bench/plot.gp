# Plots of bench/run.sh's results; `dir` is the results folder:
#   gnuplot -e "dir='bench/results'" bench/plot.gp
# Data files come from bench/plot_data.py.
if (!exists("dir")) dir = "bench/results"
set terminal pngcairo size 800,500 font ",10" noenhanced
set grid
set key top left
set logscale x 2
set xtics ("64 B" 64, "256 B" 256, "1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, \
           "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576)
set xlabel "message size"

set output dir."/latency_vs_size.png"
set title "RDMA write latency vs message size (soft provider vs raw TCP, loopback)"
set ylabel "median latency (µs)"
set logscale y 10
plot dir."/sweep.dat" using 1:2 with linespoints title "raw TCP (send, 1-byte answer)", \
     dir."/sweep.dat" using 1:3 with linespoints title "soft RDMA write (post, completion)"

set output dir."/bandwidth_vs_size.png"
set title "RDMA write bandwidth vs message size (QD 16; raw TCP streaming)"
set ylabel "MB/s"
set logscale y 10
plot dir."/sweep.dat" using 1:4 with linespoints title "raw TCP", \
     dir."/sweep.dat" using 1:5 with linespoints title "soft RDMA write, QD 16"

set output dir."/conn_setup_rate.png"
set title "connection setup rate vs requests in flight (soft provider, one io_context)"
unset logscale y
set yrange [0:*]
set xtics autofreq
set format x "%g"
set xlabel "connections in flight"
set ylabel "connections / s (connect, ESTABLISHED, disconnect, CLOSED)"
set key bottom right
plot dir."/conn_setup.dat" using 1:2:3:4 with yerrorlines title "conn_setup_bench (median; bars: min, max)"
