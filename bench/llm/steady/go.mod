module bolide.bench/steady

go 1.22
